package promql

import (
	"errors"
	neturl "net/url"
	"strings"
)

// unparseable stands for a URL that does not parse: its text may hold a
// password that Redacted could not find, so none of it is shown.
const unparseable = "<unparseable URL>"

// Redacted is url as gpupack shows and logs it: the password of its
// userinfo replaced by "xxxxx" (net/url's URL.Redacted), or
// "<unparseable URL>" where url does not parse. Every page, API answer,
// error and log line that names the Prometheus URL goes through it.
func Redacted(url string) string {
	u, err := neturl.Parse(url)
	if err != nil {
		return unparseable
	}
	return u.Redacted()
}

// parseProblem says why url does not parse, for New's error: the parser's
// reason where url has no userinfo, which it might quote a piece of (a
// password with a "/" in it reads as a port), and only that it does not
// parse where it has.
func parseProblem(url string, err error) string {
	if strings.Contains(url, "@") {
		return "it does not parse as a URL (its text is not shown: it holds credentials)"
	}
	if ue := (*neturl.Error)(nil); errors.As(err, &ue) {
		err = ue.Err
	}
	return "it does not parse as a URL: " + err.Error()
}

// redactURLError replaces the URL that a net/url error (such as one that
// net/http's client returns) names by its Redacted form, in place.
func redactURLError(err error) {
	if ue := (*neturl.Error)(nil); errors.As(err, &ue) {
		ue.URL = Redacted(ue.URL)
	}
}

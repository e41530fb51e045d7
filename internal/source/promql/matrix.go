package promql

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/prometheus/common/model"
)

// decodeMatrix reads the body of a query_range answer, in the format of
// Prometheus' HTTP API (https://prometheus.io/docs/prometheus/latest/querying/api/):
//
//	{"status": "success", "data": {"resultType": "matrix", "result": [
//	  {"metric": {"<label>": "<value>", ...}, "values": [[<unix seconds>, "<value>"], ...]}, ...]},
//	 "warnings": [...], "infos": [...]}
//
// into the model.Matrix that client_golang's decoding gives (the same
// labels, times to the millisecond and values, NaN and infinities
// included), with far fewer allocations: it is the hot path of a long
// report, where a month of a fleet answers millions of points. Every
// label name and value is allocated once per answer, not once per series;
// a series' native histograms are skipped (gpupack reads floats only). An
// answer with status "error" is returned as that error; anything that is
// not such an answer, as an error that says what was found where. An
// answer with warnings (a partial answer: a store that Thanos or another
// federating query layer could not reach), or that VictoriaMetrics marks
// "isPartial": true (a storage node of its cluster did not answer), is
// read whole and refused as a *PartialAnswerError: its figures would be
// taken for complete.
func decodeMatrix(body []byte) (model.Matrix, error) {
	return decodeMatrixSharing(body, nil)
}

// decodeMatrixSharing is decodeMatrix, where labels (if not nil) gives
// the series whose label set it holds (the same bytes in the answer) its
// map, and keeps those of the others: the hourly path reads an owner's
// label set in each of its figures' answers, and makes one map of it, not
// one per answer. The maps are shared: nothing may change them.
func decodeMatrixSharing(body []byte, labels *labelSets) (model.Matrix, error) {
	d := matrixDecoder{scanner: scanner{b: body, api: "query_range"}, strings: map[string]string{}, want: matrixType, sets: labels}
	if err := d.answer(); err != nil {
		return nil, err
	}
	return d.matrix, nil
}

// labelSets are the label sets decoded from a group of answers, by their
// text in the answer.
type labelSets struct {
	mu   sync.Mutex
	sets map[string]model.Metric
}

func newLabelSets() *labelSets { return &labelSets{sets: map[string]model.Metric{}} }

// decodeVector reads the body of an instant query's answer whose result
// is an instant vector,
//
//	{"status": "success", "data": {"resultType": "vector", "result": [
//	  {"metric": {"<label>": "<value>", ...}, "value": [<unix seconds>, "<value>"]}, ...]}}
//
// as decodeMatrix reads a range query's, into the model.Vector that
// client_golang's decoding gives, less the samples that hold a native
// histogram and no float (gpupack reads floats only). kube-state-metrics'
// pod times of a month of a fleet are a vector of a sample per pod.
func decodeVector(body []byte) (model.Vector, error) {
	d := matrixDecoder{scanner: scanner{b: body, api: "query"}, strings: map[string]string{}, want: vectorType}
	if err := d.answer(); err != nil {
		return nil, err
	}
	return d.vector, nil
}

// eachVectorSample reads the body as decodeVector does and calls f with
// each sample as it is read, before the rest of the answer is checked:
// one sample and one metric map, reused, and label values allocated for
// each sample rather than interned (each of a vector of pods' names is
// seen once). An answer found malformed after some samples were handed on
// is an error all the same.
func eachVectorSample(body []byte, f func(*model.Sample)) error {
	d := matrixDecoder{scanner: scanner{b: body, api: "query"}, want: vectorType, each: f}
	return d.answer()
}

// answerError is an answer whose status is "error": Prometheus' own
// errorType and error, as client_golang's v1.Error prints them.
type answerError struct{ kind, msg string }

func (e *answerError) Error() string { return e.kind + ": " + e.msg }

// PartialAnswerError is a successful answer that carried warnings: Thanos'
// partial response (a store API that did not answer), or a remote read
// that failed, either way an answer that may lack series. Its figures are
// not used: an hour read from one would stay short for the whole window.
type PartialAnswerError struct {
	// Warnings are the answer's warnings, as the server wrote them.
	Warnings []string
}

// isPartialWarning stands for VictoriaMetrics' "isPartial": true, which
// comes without a warning of its own.
const isPartialWarning = `"isPartial": true (a VictoriaMetrics storage node did not answer; its -search.denyPartialResponse makes that an error)`

// maxWarningsShown is how many of an answer's warnings an error quotes.
const maxWarningsShown = 3

func (e *PartialAnswerError) Error() string {
	shown := e.Warnings[:min(len(e.Warnings), maxWarningsShown)]
	more := ""
	if len(e.Warnings) > len(shown) {
		more = fmt.Sprintf(" and %d more", len(e.Warnings)-len(shown))
	}
	return fmt.Sprintf("partial answer, with warnings %q%s; the figures are not used and the read is tried again: make every store of the query layer answer (for Thanos, check its stores; --query.partial-response off makes it fail instead)", shown, more)
}

// scanner walks a JSON document (RFC 8259) held in memory.
type scanner struct {
	b     []byte
	i     int
	depth int    // of the arrays and objects skip is in
	api   string // the endpoint that answered: query_range or query
}

// maxDepth is encoding/json's limit on nesting.
const maxDepth = 10000

// syntaxError says what was wanted at the scanner's offset and what is
// there, and that the answer is not Prometheus' JSON.
func (s *scanner) syntaxError(want string) error {
	found := "the end of the answer"
	if s.i < len(s.b) {
		end := min(s.i+20, len(s.b))
		found = strconv.Quote(string(s.b[s.i:end]))
	}
	return fmt.Errorf("malformed %s answer at byte %d of %d: want %s, found %s; the URL may not be Prometheus' API (a proxy's page?), or the answer was cut short", s.api, s.i, len(s.b), want, found)
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek skips white space and says the next byte (0 at the end).
func (s *scanner) peek() byte {
	s.space()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// consume skips white space and the byte c, or fails saying what was wanted.
func (s *scanner) consume(c byte, want string) error {
	if s.peek() != c {
		return s.syntaxError(want)
	}
	s.i++
	return nil
}

// boolean consumes a JSON true or false.
func (s *scanner) boolean(want string) (bool, error) {
	for _, lit := range []string{"true", "false"} {
		if s.peek() == lit[0] && s.i+len(lit) <= len(s.b) && string(s.b[s.i:s.i+len(lit)]) == lit {
			s.i += len(lit)
			return lit == "true", nil
		}
	}
	return false, s.syntaxError(want)
}

// null consumes a JSON null if one is next.
func (s *scanner) null() bool {
	if s.peek() == 'n' && s.i+4 <= len(s.b) && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

// rawString consumes a string and returns it as it is, quotes included,
// and whether it needs decoding (an escape, a control character or a
// byte outside ASCII, which encoding/json checks and mends).
func (s *scanner) rawString(want string) (raw []byte, plain bool, err error) {
	if s.peek() != '"' {
		return nil, false, s.syntaxError(want)
	}
	start := s.i
	plain = true
	for s.i++; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return s.b[start:s.i], plain, nil
		case c == '\\':
			plain = false
			s.i++
		case c < 0x20 || c >= utf8.RuneSelf:
			plain = false
		}
	}
	s.i = start
	return nil, false, s.syntaxError(want + " (a string that ends)")
}

// str consumes a string and returns its value, as encoding/json decodes
// it, allocated only where it is not plain.
func (s *scanner) str(want string) ([]byte, error) {
	at := s.i
	raw, plain, err := s.rawString(want)
	if err != nil || plain {
		return raw[min(1, len(raw)):max(len(raw)-1, 0)], err
	}
	v, err := s.validString(raw)
	if err != nil {
		s.i = at
		return nil, s.syntaxError(want + " (" + err.Error() + ")")
	}
	return []byte(v), nil
}

// validString decodes a string that is not plain (quotes included) as
// encoding/json does, which refuses bad escapes and control characters.
func (s *scanner) validString(raw []byte) (string, error) {
	var v string
	err := json.Unmarshal(raw, &v)
	return v, err
}

// number consumes a JSON number and returns its text.
func (s *scanner) number(want string) ([]byte, error) {
	s.space()
	start := s.i
	digits := func() int {
		n := 0
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	if first := s.i; digits() == 0 || (s.b[first] == '0' && s.i-first > 1) {
		s.i = start
		return nil, s.syntaxError(want)
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if digits() == 0 {
			s.i = start
			return nil, s.syntaxError(want)
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if digits() == 0 {
			s.i = start
			return nil, s.syntaxError(want)
		}
	}
	return s.b[start:s.i], nil
}

// skip consumes any JSON value.
func (s *scanner) skip() error {
	switch c := s.peek(); {
	case c == '"':
		_, err := s.str("a string")
		return err
	case c == '{' || c == '[':
		if s.depth++; s.depth > maxDepth {
			return s.syntaxError("at most 10000 nested arrays and objects")
		}
		defer func() { s.depth-- }()
		if c == '{' {
			return s.object("an object", func([]byte) error { return s.skip() })
		}
		return s.array("an array", s.skip)
	case c == 't' || c == 'f' || c == 'n':
		for _, lit := range []string{"true", "false", "null"} {
			if s.i+len(lit) <= len(s.b) && string(s.b[s.i:s.i+len(lit)]) == lit {
				s.i += len(lit)
				return nil
			}
		}
		return s.syntaxError("a value")
	default:
		_, err := s.number("a value")
		return err
	}
}

// object consumes an object, calling field for each key (its value is
// next); null is an empty object.
func (s *scanner) object(what string, field func(key []byte) error) error {
	return s.sequence('{', '}', what, func() error {
		key, err := s.str("a key of " + what)
		if err != nil {
			return err
		}
		if err := s.consume(':', "':' after a key"); err != nil {
			return err
		}
		return field(key)
	})
}

// array consumes an array, calling elem for each element; null is an
// empty array.
func (s *scanner) array(what string, elem func() error) error {
	return s.sequence('[', ']', what, elem)
}

// sequence consumes what open and end enclose, elements (read by elem)
// separated by commas; null is an empty one.
func (s *scanner) sequence(open, end byte, what string, elem func() error) error {
	if s.null() {
		return nil
	}
	if err := s.consume(open, what); err != nil {
		return err
	}
	if s.peek() == end {
		s.i++
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case end:
			s.i++
			return nil
		default:
			return s.syntaxError(fmt.Sprintf("',' or '%c' in %s", end, what))
		}
	}
}

// matrixType is the resultType of a range query's answer, vectorType
// that of an instant query's over an instant vector.
var (
	matrixType = model.ValMatrix.String()
	vectorType = model.ValVector.String()
)

type matrixDecoder struct {
	scanner
	want   string // the resultType: matrixType or vectorType
	matrix model.Matrix
	vector model.Vector
	// each, where set, takes each sample of a vector instead of vector,
	// and strings is nil: nothing is interned.
	each func(*model.Sample)
	// sets, where set, shares label sets between answers.
	sets *labelSets
	// strings interns the answer's label names and values.
	strings map[string]string
	// labels is the series being read, reused.
	labels []string
}

// other skips the value of a key that is none of known, and refuses one
// that differs from one of them in case only: encoding/json would read it
// as that one.
func (d *matrixDecoder) other(key []byte, known ...string) error {
	for _, k := range known {
		if string(key) != k && bytes.EqualFold(key, []byte(k)) {
			return d.syntaxError(fmt.Sprintf("%q, not %q", k, key))
		}
	}
	return d.skip()
}

func (d *matrixDecoder) intern(b []byte) string {
	if d.strings == nil {
		return string(b)
	}
	if v, ok := d.strings[string(b)]; ok {
		return v
	}
	v := string(b)
	d.strings[v] = v
	return v
}

func (d *matrixDecoder) answer() error {
	var status, kind, msg string
	var resultType string
	var warnings []string
	sawResult := false
	partial := false
	err := d.object("the answer (a JSON object)", func(key []byte) error {
		switch string(key) {
		case "status", "errorType", "error":
			v, err := d.str("a string")
			switch string(key) {
			case "status":
				status = string(v)
			case "errorType":
				kind = string(v)
			default:
				msg = string(v)
			}
			return err
		case "data":
			return d.object(`"data" (an object)`, func(key []byte) error {
				switch string(key) {
				case "resultType":
					v, err := d.str("a string")
					resultType = string(v)
					return err
				case "result":
					sawResult = true
					switch {
					case resultType != "" && resultType != d.want:
						return d.skip()
					case d.want == vectorType:
						return d.vectorResult()
					}
					return d.result()
				}
				return d.other(key, "resultType", "result")
			})
		case "warnings":
			return d.array(`"warnings" (an array of strings)`, func() error {
				v, err := d.str("a warning (a string)")
				warnings = append(warnings, string(v))
				return err
			})
		case "isPartial":
			var err error
			partial, err = d.boolean(`"isPartial" (true or false)`)
			return err
		}
		return d.other(key, "status", "errorType", "error", "data", "warnings", "infos", "isPartial")
	})
	if err != nil {
		return err
	}
	if d.space(); d.i < len(d.b) {
		return d.syntaxError("the end of the answer")
	}
	switch {
	case status == "error":
		return &answerError{kind, msg}
	case status != "success":
		return fmt.Errorf("%s answer with status %q, want \"success\" or \"error\"; the URL may not be Prometheus' API", d.api, status)
	case resultType != d.want && d.want == vectorType:
		return fmt.Errorf("%s answered a %q, want an instant vector", d.api, resultType)
	case resultType != d.want:
		return fmt.Errorf("%s answered a %q, want a range vector (matrix)", d.api, resultType)
	case !sawResult:
		return fmt.Errorf("%s answer without a result; the URL may not be Prometheus' API", d.api)
	case partial:
		return &PartialAnswerError{Warnings: append(warnings, isPartialWarning)}
	case len(warnings) > 0:
		return &PartialAnswerError{Warnings: warnings}
	}
	return nil
}

// result reads the matrix.
func (d *matrixDecoder) result() error {
	d.matrix = nil // a repeated "result" replaces the first
	return d.array(`"result" (an array of series)`, func() error {
		ss := &model.SampleStream{}
		sawMetric := false
		err := d.object("a series (an object)", func(key []byte) error {
			switch string(key) {
			case "metric":
				sawMetric = true
				return d.metric(ss)
			case "values":
				return d.values(ss)
			}
			return d.other(key, "metric", "values", "histograms")
		})
		if err == nil && !sawMetric {
			return d.syntaxError(`a series with its "metric"`)
		}
		d.matrix = append(d.matrix, ss)
		return err
	})
}

// vectorResult reads the instant vector; a sample without a float value
// (a native histogram's) is left out.
func (d *matrixDecoder) vectorResult() error {
	d.vector = nil // a repeated "result" replaces the first
	var ss model.SampleStream
	var each model.Sample
	return d.array(`"result" (an array of samples)`, func() error {
		if d.each != nil {
			clear(ss.Metric) // reused
		} else {
			ss.Metric = nil
		}
		ss.Values = ss.Values[:0]
		sawMetric, sawValue, sawHistogram := false, false, false
		err := d.object("a sample (an object)", func(key []byte) error {
			switch string(key) {
			case "metric":
				sawMetric = true
				return d.metric(&ss)
			case "value":
				sawValue = true
				ss.Values = ss.Values[:0] // a repeated "value" replaces the first
				return d.pair(&ss)
			case "histogram":
				sawHistogram = true
			}
			return d.other(key, "metric", "value", "histogram")
		})
		switch {
		case err != nil:
			return err
		case !sawMetric:
			return d.syntaxError(`a sample with its "metric"`)
		case !sawValue && !sawHistogram:
			return d.syntaxError(`a sample with its "value"`)
		case !sawValue:
		case d.each != nil:
			each = model.Sample{Metric: ss.Metric, Value: ss.Values[0].Value, Timestamp: ss.Values[0].Timestamp}
			d.each(&each)
		default:
			d.vector = append(d.vector, &model.Sample{Metric: ss.Metric, Value: ss.Values[0].Value, Timestamp: ss.Values[0].Timestamp})
		}
		return nil
	})
}

func (d *matrixDecoder) metric(ss *model.SampleStream) error {
	if d.null() {
		ss.Metric = nil
		return nil
	}
	var raw []byte // the label set's text, where it is to be shared
	if d.sets != nil && ss.Metric == nil {
		// A label set seen before, as the same text, is the same set.
		// Text not as Prometheus writes labels is read alone.
		d.space()
		if end, ok := labelsEnd(d.b, d.i); ok {
			raw = d.b[d.i:end]
			d.sets.mu.Lock()
			m, seen := d.sets.sets[string(raw)]
			d.sets.mu.Unlock()
			if seen {
				ss.Metric, d.i = m, end
				return nil
			}
		}
	} else if d.sets != nil && ss.Metric != nil {
		ss.Metric = ss.Metric.Clone() // the first may be shared
	}
	d.labels = d.labels[:0]
	err := d.object(`"metric" (an object of labels)`, func(key []byte) error {
		name := d.intern(key)
		v, err := d.str("a label's value (a string)")
		if err != nil {
			return err
		}
		d.labels = append(d.labels, name, d.intern(v))
		return nil
	})
	if err != nil {
		return err
	}
	if ss.Metric == nil { // encoding/json adds a repeated "metric" to the first
		ss.Metric = make(model.Metric, len(d.labels)/2)
	}
	for i := 0; i < len(d.labels); i += 2 {
		ss.Metric[model.LabelName(d.labels[i])] = model.LabelValue(d.labels[i+1])
	}
	if raw != nil {
		d.sets.mu.Lock()
		d.sets.sets[string(raw)] = ss.Metric
		d.sets.mu.Unlock()
	}
	return nil
}

// labelsEnd finds the end of the object of labels that starts at b[i],
// where it is as Prometheus writes one, {"name":"value",...} without
// white space: the offset just past its '}', and true. It does not check
// the strings' escapes and characters: the object's first reading does
// (and a later one of the same text needs not). Anything else says false.
func labelsEnd(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '{' {
		return 0, false
	}
	i++
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		for k := 0; k < 2; k++ { // the name, then the value
			if i >= len(b) || b[i] != '"' {
				return 0, false
			}
			i++
			for {
				j := bytes.IndexByte(b[i:], '"')
				if j < 0 {
					return 0, false
				}
				i += j + 1
				backslashes := 0
				for p := i - 2; p >= 0 && b[p] == '\\'; p-- {
					backslashes++
				}
				if backslashes%2 == 0 {
					break // not escaped
				}
			}
			if i >= len(b) || b[i] != ":,"[k] {
				if k == 1 && i < len(b) && b[i] == '}' {
					return i + 1, true
				}
				return 0, false
			}
			i++
		}
	}
}

func (d *matrixDecoder) values(ss *model.SampleStream) error {
	ss.Values = nil // a repeated "values" replaces the first
	if d.null() {
		return nil
	}
	return d.array(`"values" (an array of [time, "value"])`, func() error { return d.pair(ss) })
}

// pair reads a sample, [time, "value"], and appends it to ss.Values.
func (d *matrixDecoder) pair(ss *model.SampleStream) error {
	if err := d.consume('[', `a sample ([time, "value"])`); err != nil {
		return err
	}
	at := d.i
	num, err := d.number("a sample's time (seconds since the epoch)")
	if err != nil {
		return err
	}
	t, ok := unixMillis(num)
	if !ok {
		d.i = at
		return d.syntaxError("a sample's time in seconds with at most 3 decimals, within int64 milliseconds")
	}
	if err := d.consume(',', "',' after a sample's time"); err != nil {
		return err
	}
	// The value's text as it is, escapes and all, as model.SampleValue
	// reads it.
	at = d.i
	raw, plain, err := d.rawString(`a sample's value (a string such as "1.5" or "NaN")`)
	if err != nil {
		return err
	}
	v, err := strconv.ParseFloat(string(raw[1:len(raw)-1]), 64)
	if err == nil && !plain {
		_, err = d.validString(raw)
	}
	if err != nil {
		d.i = at
		return d.syntaxError(`a sample's value (a string such as "1.5" or "NaN")`)
	}
	if err := d.consume(']', "']' after a sample's value"); err != nil {
		return err
	}
	ss.Values = append(ss.Values, model.SamplePair{Timestamp: model.Time(t), Value: model.SampleValue(v)})
	return nil
}

// unixMillis reads a JSON number of seconds as model.Time does: the
// fraction's first three digits are the milliseconds, any more are
// dropped; an exponent is refused. It says false where that fails or
// overflows.
func unixMillis(num []byte) (int64, bool) {
	neg := len(num) > 0 && num[0] == '-'
	if neg {
		num = num[1:]
	}
	var sec, ms int64
	i := 0
	for ; i < len(num) && num[i] >= '0' && num[i] <= '9'; i++ {
		if sec > (math.MaxInt64/1000-9)/10 {
			return 0, false
		}
		sec = sec*10 + int64(num[i]-'0')
	}
	if i < len(num) && num[i] == '.' {
		i++
		for k := 0; k < 3; k++ {
			ms *= 10
			if i < len(num) && num[i] >= '0' && num[i] <= '9' {
				ms += int64(num[i] - '0')
				i++
			}
		}
		for i < len(num) && num[i] >= '0' && num[i] <= '9' {
			i++
		}
	}
	if i != len(num) {
		return 0, false // an exponent
	}
	t := sec*1000 + ms
	if neg {
		t = -t
	}
	return t, true
}

#!/usr/bin/env bash
# Prints the build stamp of the current checkout for internal/util/buildversion:
#
#   hack/version.sh            VERSION=, COMMIT=, COMMIT_TIME=, MODIFIED= and
#                              SOURCE_DATE_EPOCH= lines, quoted for eval
#   hack/version.sh --ldflags  the -X flags that stamp them into a binary
#
# VERSION is `git describe --tags --always` (a v* tag, tag-N-gHASH, or the
# short commit), with -dirty when MODIFIED; MODIFIED is true when `git
# status --porcelain` lists anything (untracked files too, as Go's own VCS
# stamp counts them). Outside a git checkout, or
# without git, every value is "unknown" and SOURCE_DATE_EPOCH is 0, and
# --ldflags prints nothing: the binary then reports what Go's build
# information holds. Builds stamp explicitly rather than relying on Go's VCS
# stamp because GOFLAGS=-buildvcs=false is common (and needed where git
# refuses the checkout), and -trimpath drops -ldflags from the build
# information.
set -euo pipefail
cd "$(dirname "$0")/.."

pkg=github.com/gpupack/gpupack/internal/util/buildversion
version=unknown commit=unknown commit_time=unknown modified=unknown epoch=0
if commit="$(git rev-parse --verify HEAD 2>/dev/null)"; then
	version="$(git describe --tags --always --match 'v[0-9]*')"
	commit_time="$(git show -s --format=%cI HEAD)"
	epoch="$(git show -s --format=%ct HEAD)"
	modified=false
	if [[ -n "$(git status --porcelain)" ]]; then
		modified=true
		version="${version}-dirty"
	fi
else
	commit=unknown
fi

case "${1:-}" in
--ldflags)
	[[ "${commit}" == unknown ]] && exit 0
	echo "-X ${pkg}.version=${version} -X ${pkg}.commit=${commit} -X ${pkg}.commitTime=${commit_time} -X ${pkg}.modified=${modified}"
	;;
"")
	printf 'VERSION=%q\nCOMMIT=%q\nCOMMIT_TIME=%q\nMODIFIED=%q\nSOURCE_DATE_EPOCH=%q\n' "${version}" "${commit}" "${commit_time}" "${modified}" "${epoch}"
	;;
*)
	echo "usage: $0 [--ldflags]" >&2
	exit 2
	;;
esac

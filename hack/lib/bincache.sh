# Sourced by hack/*-bins.sh: the cache directory of one component, keyed by
# version, outside the work tree.
#
# bincache_open NAME KEY [ARG]: sets bin_dir to
# ${GPUPACK_BIN_CACHE:-$HOME/.cache/gpupack/bin}/KEY; with ARG --print-dir it
# prints bin_dir and exits, with any other ARG it prints the usage and exits
# 2; otherwise it creates bin_dir and holds its lock (fd 9) for the rest of
# the script, so that one build runs at a time per cache directory and a
# second caller waits, then finds the binaries already there. log prints a
# line tagged with NAME.
bincache_open() {
	bincache_name="$1"
	bin_dir="${GPUPACK_BIN_CACHE:-$HOME/.cache/gpupack/bin}/$2"
	case "${3:-}" in
	--print-dir)
		echo "${bin_dir}"
		exit 0
		;;
	"") ;;
	*)
		echo "usage: $0 [--print-dir]" >&2
		exit 2
		;;
	esac
	mkdir -p "${bin_dir}"
	exec 9>"${bin_dir}/.lock"
	if ! flock -n 9; then
		log "another build holds ${bin_dir}/.lock; waiting"
		flock 9
	fi
}

log() { echo "[${bincache_name} $(date +%H:%M:%S)] $*"; }

# bincache_have WHAT FILE...: where every FILE is in bin_dir already, logs
# that WHAT is cached, prints bin_dir and exits; otherwise returns.
bincache_have() {
	local what="$1" f
	shift
	for f in "$@"; do
		[[ -s "${bin_dir}/${f}" ]] || return 0
	done
	log "${what}: cached"
	echo "${bin_dir}"
	exit 0
}

# bincache_module NAME: makes a throwaway Go module, gpupack.invalid/NAME,
# in a temporary directory (work_dir, removed when the script exits) and
# enters it, so that the repository's go.mod never depends on what is
# built.
bincache_module() {
	work_dir="$(mktemp -d "${TMPDIR:-/tmp}/gpupack-$1.XXXXXX")"
	trap 'rm -rf "${work_dir}"' EXIT
	cd "${work_dir}"
	go mod init "gpupack.invalid/$1" >/dev/null 2>&1
}

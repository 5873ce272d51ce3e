#!/bin/sh
# scripts/deps.sh - the Debian packages stager needs, in one place.
#
#   sh scripts/deps.sh install          install them (apt-get; sudo when not root)
#   sh scripts/deps.sh check build|test  one line naming what is missing, exit 1
#
# "build" is what `make` and `make demo` need; "test" adds what `make test`,
# the sanitizer runs and the benchmarks use (bats, a real Slurm, sshd, FUSE).
set -eu

build_pkgs="build-essential pkg-config
libarchive-dev libzstd-dev libxxhash-dev libssl-dev librsync-dev libfuse3-dev fuse3
python3-dev"
test_pkgs="libcmocka-dev bats jq zstd tar zip strace util-linux procps bc file python3 time hostname man-db
clang libclang-rt-14-dev
slurm-wlm munge
rsync gnuplot-nox archivemount squashfuse squashfs-tools xfsprogs
openssh-server openssh-client
bash-completion lmod
python3-torch python3-numpy python3-pil"

# pkg-config names (and one header) of the libraries, with their packages:
# checked this way, not through dpkg, so a build from source works too
build_libs="libarchive:libarchive-dev libzstd:libzstd-dev libxxhash:libxxhash-dev
libcrypto:libssl-dev fuse3:libfuse3-dev"

missing_build() {
	m=
	command -v "${CC:-cc}" >/dev/null 2>&1 || m="$m build-essential"
	if command -v "${PKG_CONFIG:-pkg-config}" >/dev/null 2>&1; then
		for l in $build_libs; do
			"${PKG_CONFIG:-pkg-config}" --exists "${l%%:*}" 2>/dev/null || m="$m ${l#*:}"
		done
	else
		m="$m pkg-config"
		for l in $build_libs; do m="$m ${l#*:}"; done
	fi
	echo '#include <librsync.h>' | "${CC:-cc}" -E -x c - >/dev/null 2>&1 || m="$m librsync-dev"
	# the Python module is for Debian's own python3 (make python)
	inc=$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)
	[ -n "$inc" ] && [ -f "$inc/Python.h" ] || m="$m python3-dev"
	echo "$m"
}

missing_test() {
	m=$(missing_build)
	if command -v dpkg-query >/dev/null 2>&1; then
		# shellcheck disable=SC2086
		for p in $test_pkgs; do
			dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q ' installed$' || m="$m $p"
		done
	else
		for c in bats jq zstd slurmctld munged sshd rsync fusermount3; do
			command -v "$c" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin command -v "$c" >/dev/null 2>&1 ||
				m="$m $c"
		done
	fi
	echo "$m"
}

case "${1:-}" in
install)
	SUDO=
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null || { echo "deps: run as root or install sudo" >&2; exit 1; }
		SUDO=sudo
	fi
	export DEBIAN_FRONTEND=noninteractive
	echo "deps: installing Debian packages (apt-get, about a minute on a fresh machine)" >&2
	$SUDO apt-get update -qq
	# the Slurm and munge packages must not start their stock daemons: the
	# tests start their own cluster
	made_policy=
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
		$SUDO chmod +x /usr/sbin/policy-rc.d
		made_policy=1
	fi
	# shellcheck disable=SC2086
	$SUDO apt-get install -y -qq --no-install-recommends $build_pkgs $test_pkgs >/dev/null
	[ -z "$made_policy" ] || $SUDO rm -f /usr/sbin/policy-rc.d
	echo "deps: done" >&2
	;;
check)
	case "${2:-build}" in
	build) m=$(missing_build) ;;
	test) m=$(missing_test) ;;
	*) echo "usage: deps.sh check build|test" >&2; exit 2 ;;
	esac
	[ -z "$m" ] && exit 0
	# one line: what is missing and the command that installs it
	echo "stager: missing Debian packages:$m; install them with 'make deps' (or: sudo apt-get install$m)" >&2
	exit 1
	;;
*)
	echo "usage: deps.sh install | check build|test" >&2
	exit 2
	;;
esac

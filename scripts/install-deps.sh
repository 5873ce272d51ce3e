#!/bin/sh
# Install the Debian packages stager needs to build, test and benchmark.
# Runs apt-get as root (through sudo when not root).  Debian 12.
set -eu
pkgs="build-essential pkg-config
libarchive-dev libzstd-dev libxxhash-dev libssl-dev librsync-dev
libcmocka-dev bats jq zstd tar zip strace util-linux
clang libclang-rt-14-dev
slurm-wlm munge
rsync libfuse3-dev fuse3 gnuplot-nox
openssh-server openssh-client
bash-completion lmod"
SUDO=
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null || { echo "install-deps: run as root or install sudo" >&2; exit 1; }
	SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
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
$SUDO apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
[ -z "$made_policy" ] || $SUDO rm -f /usr/sbin/policy-rc.d
echo "install-deps: done"

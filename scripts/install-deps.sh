#!/bin/sh
# Install the Debian packages stager needs to build, test and benchmark.
# Runs apt-get as root (through sudo when not root).  Debian 12.
set -eu
pkgs="build-essential pkg-config
libarchive-dev libzstd-dev libxxhash-dev libssl-dev librsync-dev
libcmocka-dev bats jq zstd tar strace
clang libclang-rt-14-dev"
SUDO=
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null || { echo "install-deps: run as root or install sudo" >&2; exit 1; }
	SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
echo "install-deps: done"

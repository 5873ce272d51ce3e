#!/bin/sh
# Install the Debian packages stager needs to build, test and benchmark
# (the list is in scripts/deps.sh).  Debian 12; sudo when not root.
exec sh "$(dirname "$0")/deps.sh" install

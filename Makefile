# stager - plain, non-recursive Makefile.  Objects go under build/.
# `make help` lists the targets.

PREFIX  ?= /usr/local
DESTDIR ?=
BINDIR  ?= $(PREFIX)/bin
LIBDIR  ?= $(PREFIX)/lib
INCDIR  ?= $(PREFIX)/include
MANDIR  ?= $(PREFIX)/share/man
PKGDIR  ?= $(LIBDIR)/pkgconfig
DOCDIR  ?= $(PREFIX)/share/doc/stager
# the example batch scripts, where Debian keeps a package's examples
EXAMPLEDIR ?= $(DOCDIR)/examples
# systemd-tmpfiles reads /etc, /run, /usr/local/lib and /usr/lib/tmpfiles.d
# only (tmpfiles.d(5)): under another PREFIX nothing is installed there
# unless TMPFILESDIR is given (e.g. /etc/tmpfiles.d); the file goes to
# DOCDIR instead, and make install says so
TMPFILESDIR ?= $(if $(filter /usr /usr/local,$(PREFIX)),$(PREFIX)/lib/tmpfiles.d)
LIBEXECDIR ?= $(PREFIX)/libexec/stager
SYSCONFDIR ?= /etc
COMPDIR ?= $(PREFIX)/share/bash-completion/completions
MODDIR  ?= $(PREFIX)/share/modulefiles

VERSION := 0.1.0
SOMAJOR := 0
B       ?= build

CC      ?= cc
PKG_CONFIG ?= pkg-config
DEPS    := libarchive libzstd libxxhash libcrypto fuse3
# The flags are asked of pkg-config when a recipe first needs them, not when
# this file is read: `make deps test` installs the packages before any
# compile, so the first build on a fresh machine links.  (`X = $(eval X :=
# ...)$(X)` runs the shell once, at the first use.)
DEP_CFLAGS = $(eval DEP_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(DEPS) 2>/dev/null))$(DEP_CFLAGS)
DEP_LIBS   = $(eval DEP_LIBS := $(shell $(PKG_CONFIG) --libs $(DEPS) 2>/dev/null))$(DEP_LIBS)
# Debian's librsync-dev ships no .pc file
RSYNC_LIBS = $(eval RSYNC_LIBS := $(shell $(PKG_CONFIG) --libs librsync 2>/dev/null || echo -lrsync))$(RSYNC_LIBS)

OPT     ?= -O2 -g
WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-missing-field-initializers \
           -Werror=incompatible-pointer-types -Werror=implicit-function-declaration -Werror=int-conversion
CFLAGS  ?=
SAN     ?=
ALL_CFLAGS = -std=c11 -D_GNU_SOURCE $(OPT) $(WARN) $(SAN) -pthread $(DEP_CFLAGS) $(CFLAGS)
LDLIBS_ALL = $(DEP_LIBS) $(RSYNC_LIBS) -pthread

LIB_SRC := $(wildcard libstage/*.c)
LIB_OBJ := $(LIB_SRC:%.c=$(B)/obj/%.o)
LIB_PIC := $(LIB_SRC:%.c=$(B)/pic/%.o)
CLI_SRC := $(wildcard stager/*.c)
CLI_OBJ := $(CLI_SRC:%.c=$(B)/obj/%.o)

STATIC  := $(B)/libstage.a
PIC_LIB := $(B)/libstage_pic.a
SHARED  := $(B)/libstage.so.$(VERSION)
STAGER  := $(B)/stager

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(B)/tests/%)
# fuzz targets: tests/fuzz/fuzz_NAME.c, each with its corpus in
# tests/fuzz/corpus/NAME/, replayed by $(B)/fuzz/replay_NAME in `make test`
FUZZ_NAMES := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_REPLAY := $(FUZZ_NAMES:%=$(B)/fuzz/replay_%)
TOOLS    := $(B)/gendata $(B)/runstat $(B)/randread $(FUZZ_REPLAY) $(B)/sharedfs $(B)/packbomb

.PHONY: all lib test unit e2e asan ubsan fuzz bench demo install uninstall clean \
	format format-check deps check-deps help bench-multinode bench-mount bench-scale soak python bench-python \
	bench-env bench-env-scale
all: $(STAGER) $(STATIC) $(SHARED)
lib: $(STATIC) $(SHARED)

# Before anything is compiled, one line names any missing package (not a
# linker error).  `make deps X` installs them first, also under -j.
ifneq ($(filter deps,$(MAKECMDGOALS)),)
DEPS_FIRST := deps
endif
CHECK_LEVEL := $(if $(filter test asan ubsan fuzz bench bench-multinode bench-mount bench-scale bench-env bench-env-scale soak,$(MAKECMDGOALS)),test,build)
check-deps: | $(DEPS_FIRST)
	@sh scripts/deps.sh check $(CHECK_LEVEL)

# intermediate objects (the fuzz replays') are kept
.SECONDARY:

# -MMD -MP: every object depends on the headers it includes
DEPFLAGS = -MMD -MP
-include $(wildcard $(B)/obj/*/*.d $(B)/obj/*/*/*.d $(B)/pic/*/*.d $(B)/tests/*.d $(B)/pyobj/*.d)

$(B)/obj/%.o: %.c | check-deps
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(DEPFLAGS) -DSTG_BUILDING -fvisibility=hidden -Ilibstage -c $< -o $@

$(B)/pic/%.o: %.c | check-deps
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(DEPFLAGS) -DSTG_BUILDING -fvisibility=hidden -fPIC -Ilibstage -c $< -o $@

$(B)/obj/stager/%.o: stager/%.c | check-deps
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(DEPFLAGS) -DSTG_VERSION_CLI='"$(VERSION)"' -Ilibstage -c $< -o $@

$(STATIC): $(LIB_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

$(SHARED): $(LIB_PIC)
	$(CC) $(SAN) -shared -Wl,-soname,libstage.so.$(SOMAJOR) -o $@ $^ $(LDLIBS_ALL)
	ln -sf libstage.so.$(VERSION) $(B)/libstage.so.$(SOMAJOR)
	ln -sf libstage.so.$(SOMAJOR) $(B)/libstage.so

# the tool links the static library: one file to copy onto a cluster
$(STAGER): $(CLI_OBJ) $(STATIC)
	$(CC) $(SAN) -o $@ $(CLI_OBJ) $(STATIC) $(LDLIBS_ALL)

# ---- Python: stager, a C extension over libstage -----------------------------
# For Debian's own python3 (another may come first on PATH), into
# $(B)/python: PYTHONPATH=$(B)/python /usr/bin/python3 -c 'import stager'
PYTHON ?= /usr/bin/python3
PY_INC = $(eval PY_INC := $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null))$(PY_INC)
PY_VER = $(eval PY_VER := $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null))$(PY_VER)
PY_MOD := $(B)/python/stager/_stager.so
PY_OUT := $(patsubst python/%,$(B)/python/%,$(wildcard python/stager/*.py))
# where `make install` puts it: a directory Debian's python3 searches
# (/usr/local/lib/python3.X/dist-packages, /usr/lib/python3/dist-packages),
# else PREFIX/lib/python3/dist-packages, to be named in PYTHONPATH
PYDIR ?= $(if $(filter /usr/local,$(PREFIX)),/usr/local/lib/python$(PY_VER)/dist-packages,$(if $(filter /usr,$(PREFIX)),/usr/lib/python3/dist-packages,$(PREFIX)/lib/python3/dist-packages))

python: $(PY_MOD) $(PY_OUT)

$(PIC_LIB): $(LIB_PIC)
	@rm -f $@
	$(AR) rcs $@ $^

$(B)/pyobj/%.o: python/%.c | check-deps
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(DEPFLAGS) -I$(PY_INC) -fPIC -fvisibility=hidden -Ilibstage -c $< -o $@

# libstage inside, its symbols hidden: the module is one file
$(PY_MOD): $(B)/pyobj/_stager.o $(B)/pyobj/ops.o $(B)/pyobj/errors.o $(PIC_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(SAN) -shared -Wl,--exclude-libs,ALL -o $@ $^ $(LDLIBS_ALL)

$(B)/python/stager/%.py: python/stager/%.py
	@mkdir -p $(dir $@)
	cp $< $@

# ---- tests ----------------------------------------------------------------

$(B)/tests/test_%: tests/unit/test_%.c $(LIB_OBJ) | check-deps
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(DEPFLAGS) -Ilibstage -Itests/unit -o $@ $< $(LIB_OBJ) -lcmocka $(LDLIBS_ALL)

$(B)/gendata: bench/gendata.c | check-deps
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 $(WARN) -o $@ $< -lm
$(B)/packbomb: bench/packbomb.c | check-deps
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 $(WARN) -o $@ $< -lzstd -lxxhash
$(B)/runstat: bench/runstat.c | check-deps
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 $(WARN) -o $@ $<
$(B)/randread: bench/randread.c | check-deps
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -pthread $(WARN) -o $@ $<
# the emulated shared filesystem (FUSE) of the benchmarks and tests
$(B)/sharedfs: bench/sharedfs.c | check-deps
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -pthread $(WARN) $$(pkg-config --cflags fuse3) -o $@ $< \
		$$(pkg-config --libs fuse3)
$(B)/fuzz/replay_%: $(B)/obj/tests/fuzz/fuzz_%.o $(B)/obj/tests/fuzz/replay.o $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(SAN) -o $@ $^ $(LDLIBS_ALL)

# `make test` prints one closing line: "N passed, N failed".
test: all python $(UNIT_BIN) $(TOOLS)
	@B=$(B) SAN_FLAGS="$(SAN)" bash tests/run.sh

# a hostile archive may ask for absurd allocations: like the real
# allocator, return NULL rather than abort
asan:
	ASAN_OPTIONS=allocator_may_return_null=1 \
	$(MAKE) B=build-asan SAN="-fsanitize=address -fno-omit-frame-pointer" OPT="-O1 -g" test
ubsan:
	$(MAKE) B=build-ubsan SAN="-fsanitize=undefined -fno-sanitize-recover=all" OPT="-O1 -g" test

# libFuzzer targets (Debian's clang); FUZZ_TIME seconds each.  The library
# is compiled once for them (in build-fuzz/obj, under -j) and each target
# linked to it.  The corpus tests/fuzz/corpus/NAME is read, never
# written: new inputs go to FUZZ_OUT/corpus-NAME and crashes to
# FUZZ_OUT/NAME-crash-* (FUZZ_OUT=DIR: somewhere else than the checkout,
# as CI does)
FUZZ_TIME ?= 60
FUZZ_OUT ?= build-fuzz
FUZZ_B := build-fuzz
FUZZ_SAN := address,undefined
FUZZ_CFLAGS = -std=c11 -D_GNU_SOURCE -g -O1 -pthread $(DEP_CFLAGS) -Ilibstage
FUZZ_BIN := $(FUZZ_NAMES:%=$(FUZZ_B)/fuzz_%)
-include $(wildcard $(FUZZ_B)/obj/*/*.d $(FUZZ_B)/obj/*/*/*.d)

$(FUZZ_B)/obj/%.o: %.c | check-deps
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link,$(FUZZ_SAN) $(DEPFLAGS) -c $< -o $@

$(FUZZ_B)/fuzz_%: $(FUZZ_B)/obj/tests/fuzz/fuzz_%.o $(LIB_SRC:%.c=$(FUZZ_B)/obj/%.o)
	clang -fsanitize=fuzzer,$(FUZZ_SAN) -pthread -o $@ $^ $(LDLIBS_ALL)

# each target a job of its own: under -j2 two run at once (a libFuzzer
# run is one thread), so CI's fuzzing takes half the time
fuzz: $(FUZZ_NAMES:%=fuzz-run-%)
fuzz-run-%: $(FUZZ_B)/fuzz_% FORCE
	@mkdir -p $(FUZZ_OUT)/corpus-$*
	@echo "fuzz: $*, $(FUZZ_TIME) s"
	@$(FUZZ_B)/fuzz_$* -max_total_time=$(FUZZ_TIME) -max_len=65536 \
		-artifact_prefix=$(FUZZ_OUT)/$*- \
		$(FUZZ_OUT)/corpus-$* tests/fuzz/corpus/$* >$(FUZZ_OUT)/$*.log 2>&1 || \
		{ tail -n 40 $(FUZZ_OUT)/$*.log; echo "fuzz: $* failed (log: $(FUZZ_OUT)/$*.log)"; exit 1; }
	@grep -h '^#[0-9]*.*DONE' $(FUZZ_OUT)/$*.log | sed 's/^/fuzz: $*: /' || true

bench: all $(TOOLS)
	B=$(B) bash bench/run.sh
# pack and cold-stage time, peak RSS and shared-FS operations over 1k to 1M
# files and 1 to 50 GiB (bench/results-scale.md; ARGS=--quick, --max-gib N)
bench-scale: all $(TOOLS)
	B=$(B) bash bench/scale.sh $(ARGS)
# the long form of the crash tests: 320 rounds of kill -9 at random
# moments of stage, collect, push, pull and clean, over 200 of them
# midway (make test runs 25); then an env of 300,000 files / 10 GiB packed
# and served, every file checked (bench/env-scale.sh: ~35 GiB free needed)
soak: all $(TOOLS)
	@B=$(B) KILL_ROUNDS=$${KILL_ROUNDS:-320} JOB_TIMEOUT=3600 bash tests/run.sh killpoints.bats
	@B=$(B) bash bench/env-scale.sh
# on a real Slurm (needs root): fan-out to 2, 4 and 8 nodes and its model
# (bench/multinode.md); data gravity, one stream of jobs with and without
# stager hint (bench/results-gravity.md)
bench-multinode: all $(TOOLS)
	B=$(B) bash bench/multinode.sh
	B=$(B) bash bench/gravity.sh
# stager mount vs squashfuse_ll vs archivemount vs staging first (needs
# /dev/fuse; ARGS=--quick)
bench-mount: all $(TOOLS)
	B=$(B) bash bench/mount.sh $(ARGS)
	B=$(B) bash bench/shards.sh $(ARGS)
# one shuffled epoch in Python: the pack (stager.torch) against the staged
# tree, stager mount and tarfile, with 0, 2 and 4 DataLoader workers
# (bench/results-python.md; ARGS=--quick)
bench-python: all python $(TOOLS)
	B=$(B) bash bench/python.sh $(ARGS)
# a job's Python environment (a venv with torch) off the shared filesystem:
# plain import vs `stager run --env`, cold and warm, vs the local disk, and
# a DataLoader with 4 spawn workers (bench/results-env.md; ARGS=--quick)
bench-env: all $(TOOLS)
	B=$(B) bash bench/env.sh $(ARGS)
# an env at scale: a synthetic venv of 300,000 files / 10 GiB (bench/genenv.py)
# packed (vs tar | zstd) and served (cold, warm, vs tar -xf), find, du and
# an import served vs not, every file's signature compared
# (bench/results-env-scale.md; ARGS=--quick: 30,000 files / 1 GiB)
bench-env-scale: all $(TOOLS)
	B=$(B) bash bench/env-scale.sh $(ARGS)

demo: all $(B)/gendata
	B=$(B) sh scripts/demo.sh

deps:
	sh scripts/deps.sh install

# ---- install ----------------------------------------------------------------

install: all python
	install -d $(DESTDIR)$(PYDIR)/stager
	install -m 644 $(PY_OUT) $(DESTDIR)$(PYDIR)/stager/
	install -m 755 $(PY_MOD) $(DESTDIR)$(PYDIR)/stager/_stager.so
	@case "$(PREFIX)" in /usr|/usr/local) echo "make install: the Python package stager is in $(PYDIR), where $(PYTHON) finds it" ;; \
	*) echo "make install: the Python package stager is in $(PYDIR): PYTHONPATH=$(PYDIR) $(PYTHON) (the module file sets it)" ;; esac
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCDIR) \
		$(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(PKGDIR) $(DESTDIR)$(DOCDIR) \
		$(DESTDIR)$(COMPDIR) $(DESTDIR)$(MODDIR)/stager $(DESTDIR)$(LIBEXECDIR)
	install -m 755 $(STAGER) $(DESTDIR)$(BINDIR)/stager
	# the hooks run with no PATH: the paths of this install are written in
	for h in prolog task-prolog epilog; do \
		sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' scripts/slurm-$$h.sh \
			>$(DESTDIR)$(LIBEXECDIR)/$$h.tmp && chmod 755 $(DESTDIR)$(LIBEXECDIR)/$$h.tmp && \
		mv -f $(DESTDIR)$(LIBEXECDIR)/$$h.tmp $(DESTDIR)$(LIBEXECDIR)/$$h || exit 1; \
	done
	install -m 644 $(STATIC) $(DESTDIR)$(LIBDIR)/libstage.a
	install -m 755 $(SHARED) $(DESTDIR)$(LIBDIR)/libstage.so.$(VERSION)
	ln -sf libstage.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libstage.so.$(SOMAJOR)
	ln -sf libstage.so.$(SOMAJOR) $(DESTDIR)$(LIBDIR)/libstage.so
	install -m 644 libstage/libstage.h $(DESTDIR)$(INCDIR)/libstage.h
	# made here, from this install's paths (not kept in the build
	# directory, where installs to other prefixes would race for it)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCDIR@|$(INCDIR)|' \
	    -e 's|@VERSION@|$(VERSION)|' libstage/libstage.pc.in >$(DESTDIR)$(PKGDIR)/libstage.pc
	install -m 644 stager/stager.1 $(DESTDIR)$(MANDIR)/man1/stager.1
	# the node's slot directory, root's, made at boot (systemd-tmpfiles),
	# in a directory systemd reads, or beside the docs with a word
	@if [ -n "$(TMPFILESDIR)" ]; then \
		echo "install -m 644 etc/tmpfiles-stager.conf $(DESTDIR)$(TMPFILESDIR)/stager.conf"; \
		install -d $(DESTDIR)$(TMPFILESDIR) && \
		install -m 644 etc/tmpfiles-stager.conf $(DESTDIR)$(TMPFILESDIR)/stager.conf; \
	else \
		install -m 644 etc/tmpfiles-stager.conf $(DESTDIR)$(DOCDIR)/tmpfiles-stager.conf && \
		echo "make install: tmpfiles.d/stager.conf is not installed: systemd reads no tmpfiles.d under $(PREFIX); as root, copy $(DOCDIR)/tmpfiles-stager.conf to /etc/tmpfiles.d/stager.conf (or make install TMPFILESDIR=/etc/tmpfiles.d) to have the slot directory made at boot; the prolog makes it too"; \
	fi
	# the example batch scripts (the admin guide's cleanup job among
	# them), not executable, as Debian keeps examples: sbatch reads them
	install -d $(DESTDIR)$(EXAMPLEDIR)
	install -m 644 scripts/examples/*.sh $(DESTDIR)$(EXAMPLEDIR)/
	install -m 644 etc/stager.conf.example $(DESTDIR)$(DOCDIR)/stager.conf.example
	install -m 644 etc/stager.bash-completion $(DESTDIR)$(COMPDIR)/stager
	sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@MANDIR@|$(MANDIR)|g' -e 's|@PKGDIR@|$(PKGDIR)|g' \
	    -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCDIR@|$(INCDIR)|g' -e 's|@VERSION@|$(VERSION)|g' \
	    -e 's|@PYDIR@|$(PYDIR)|g' etc/stager.lua.in \
		>$(DESTDIR)$(MODDIR)/stager/$(VERSION).lua

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/stager $(DESTDIR)$(LIBDIR)/libstage.a \
	      $(DESTDIR)$(LIBDIR)/libstage.so* $(DESTDIR)$(INCDIR)/libstage.h \
	      $(DESTDIR)$(PKGDIR)/libstage.pc $(DESTDIR)$(MANDIR)/man1/stager.1 \
	      $(DESTDIR)$(DOCDIR)/stager.conf.example $(DESTDIR)$(COMPDIR)/stager \
	      $(DESTDIR)$(MODDIR)/stager/$(VERSION).lua $(DESTDIR)$(LIBEXECDIR)/prolog \
	      $(DESTDIR)$(LIBEXECDIR)/task-prolog $(DESTDIR)$(LIBEXECDIR)/epilog \
	      $(DESTDIR)$(PREFIX)/lib/tmpfiles.d/stager.conf \
	      $(DESTDIR)$(DOCDIR)/tmpfiles-stager.conf \
	      $(if $(TMPFILESDIR),$(DESTDIR)$(TMPFILESDIR)/stager.conf) \
	      $(addprefix $(DESTDIR)$(EXAMPLEDIR)/,$(notdir $(wildcard scripts/examples/*.sh)))
	rmdir $(DESTDIR)$(EXAMPLEDIR) 2>/dev/null || true
	rm -rf $(DESTDIR)$(PYDIR)/stager

format:
	clang-format -i libstage/*.[ch] stager/*.[ch] tests/unit/*.[ch] tests/fuzz/*.c bench/*.c python/*.[ch]
format-check:
	clang-format --dry-run -Werror libstage/*.[ch] stager/*.[ch] tests/unit/*.[ch] tests/fuzz/*.c bench/*.c python/*.[ch]

clean:
	rm -rf build build-asan build-ubsan build-fuzz

help:
	@echo "make            build libstage (static, shared) and stager"
	@echo "make deps       install the Debian packages needed (uses sudo when not root)"
	@echo "make demo       pack, verify, list and unpack a generated example dataset"
	@echo "make test       all tests; ends with 'N passed, N failed'"
	@echo "make asan|ubsan the tests under AddressSanitizer / UndefinedBehaviorSanitizer"
	@echo "make fuzz       run the libFuzzer targets (FUZZ_TIME=seconds each, FUZZ_OUT=dir for findings)"
	@echo "make bench      benchmarks against rsync, tar/zstd, cp through an emulated NFS and on"
	@echo "                local disk; writes bench/results.md and bench/results.png; push vs"
	@echo "                scp -r and rsync -az over a local sshd to bench/results-push.md"
	@echo "make bench-multinode  fan-out to 2, 4 and 8 Slurm nodes (bench/multinode.md);"
	@echo "                jobs with and without stager hint (bench/results-gravity.md)"
	@echo "make bench-mount  stager mount vs squashfuse_ll vs archivemount vs staging first: build,"
	@echo "                first file, random reads (1-8 threads), sequential reads, 1% of the files,"
	@echo "                find/stat (bench/results-mount.md; ARGS=--quick); 100 shard packs"
	@echo "                in one mount against one pack (bench/results-shards.md)"
	@echo "make bench-scale      pack and stage over 1k to 1M files and 1 to 50 GiB: time, peak RSS,"
	@echo "                shared-FS operations (bench/results-scale.md, .png; ARGS=--quick)"
	@echo "make bench-env  import torch from a venv on the emulated NFS, plain vs stager run --env"
	@echo "                (cold, warm) vs local disk, and 4 spawn DataLoader workers: shared-FS"
	@echo "                operations, bytes, time (bench/results-env.md; ARGS=--quick)"
	@echo "make bench-env-scale  a venv of 300,000 files / 10 GiB: stager pack vs tar, run --env cold"
	@echo "                and warm vs tar -xf, find/du/import served vs not, every file compared"
	@echo "                (bench/results-env-scale.md; ARGS=--quick: 30,000 files / 1 GiB)"
	@echo "make soak       320 rounds of kill -9 at random moments of stage, collect, push, pull, clean;"
	@echo "                then bench-env-scale (needs ~35 GiB free)"
	@echo "make install    PREFIX=/usr/local DESTDIR= SYSCONFDIR=/etc : tool, library, header, .pc, man page, Slurm hooks,"
	@echo "                example scripts (DOCDIR/examples), tmpfiles.d (TMPFILESDIR: PREFIX/lib/tmpfiles.d"
	@echo "                for /usr and /usr/local, else none unless given, e.g. /etc/tmpfiles.d)"
	@echo "make format     clang-format the sources (format-check to check)"

# a target that is always out of date (pattern rules cannot be .PHONY)
FORCE:

#!/usr/bin/env bats
# Every command shown in the docs is run by a test.
#
# - The user guide's examples in blocks marked ```sh are typed, in order,
#   into a shell in an empty directory, as a reader would: each block must
#   succeed (bash -e -o pipefail), with the stager under test first on
#   PATH and a private scratch root, slot directory and HOME.
# - Every `stager COMMAND --option` (and -o) shown in README.md and
#   docs/*.md, in code blocks and in inline code, names a command that
#   `stager --help` lists and an option that `stager COMMAND --help` lists
#   (a short global option such as -q through its long name, as the man
#   page pairs them).
# - Every relative link of those pages reaches a file, and a heading when
#   it names one (#anchor, as GitHub makes them).
#
# DOCS_TOP names another checkout (say a copy with a broken example, to
# see these fail).

load helpers

DOCS_TOP=${DOCS_TOP:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}

# The ```sh blocks of FILE, one per file OUT/NNN.sh, each opening with a
# comment that names its line; prints how many.
extract_sh_blocks() {
	local file=$1 out=$2
	mkdir -p "$out"
	awk -v out="$out" '
		/^```sh[ \t]*$/ { n++; f = sprintf("%s/%03d.sh", out, n); printf "# %s:%d\n", FILENAME, FNR + 1 >f; inb = 1; next }
		inb && /^```/ { inb = 0; close(f); next }
		inb { print >f }
		END { print n + 0 }' "$file"
}

@test "docs: the user guide's sh examples run, in order, in an empty directory" {
	local guide=$DOCS_TOP/docs/user-guide.md n b rc
	n=$(extract_sh_blocks "$guide" "$T/blocks")
	echo "$n sh blocks in $guide"
	# the guide has pack/ls/verify/unpack, stage, status/clean and delta
	# examples: fewer blocks means the extraction (or the guide) broke
	[ "$n" -ge 4 ]
	mkdir -p "$T/bin" "$T/work" "$T/home" "$T/slots"
	ln -s "$STAGER" "$T/bin/stager"
	for b in "$T"/blocks/*.sh; do
		echo "== $(head -1 "$b")"
		rc=0
		(cd "$T/work" && env -u SLURM_JOB_ID -u SLURM_TMPDIR -u STAGER_SITE_CONFIG \
			PATH="$T/bin:$PATH" HOME="$T/home" STAGER_SCRATCH_ROOT="$T/scratch" \
			STAGER_SLOT_DIR="$T/slots" STAGER_SITE_CONFIG=/dev/null \
			timeout 120 bash -e -o pipefail "$b") || rc=$?
		if [ "$rc" -ne 0 ]; then
			echo "docs: the block at ${b##*/} ($(head -1 "$b" | cut -c3-)) exited $rc:"
			cat "$b"
			return 1
		fi
	done
}

@test "docs: every 'stager COMMAND --option' in README.md and docs/*.md is a real command and option" {
	local cmds
	"$STAGER" --help >"$T/help"
	# the command table of `stager --help`: "  pack      pack a directory ..."
	cmds=$(awk '/^Commands:/ { on = 1; next } on && /^$/ { on = 0 } on && /^  [a-z]+ / { print $1 }' "$T/help")
	[ "$(echo "$cmds" | wc -l)" -ge 10 ]
	for c in $cmds; do "$STAGER" "$c" --help >"$T/help.$c"; done
	run python3 - "$T" "$DOCS_TOP/stager/stager.1" "$DOCS_TOP/README.md" "$DOCS_TOP"/docs/*.md <<'PY'
import os, re, sys
tmp, man, pages = sys.argv[1], sys.argv[2], sys.argv[3:]
helps = {f[5:]: open(os.path.join(tmp, f)).read() for f in os.listdir(tmp) if f.startswith('help.')}
# short global options, paired with their long names as the man page does
# (.BR \-q ", " \-\-quiet)
short = {}
for m in re.finditer(r'\\-([a-zA-Z])\s*",\s*"\s*\\-\\-([a-z][a-z-]*)', open(man).read()):
    short['-' + m.group(1)] = '--' + m.group(2)

def listed(opt, text):
    return re.search(r'(^|[^A-Za-z0-9-])' + re.escape(opt) + r'([^A-Za-z0-9-]|$)', text, re.M)

def fragments(path):
    """(line, text) of each code line and each inline code span"""
    lines = open(path).read().split('\n')
    out, para, start, inb = [], [], 0, False
    i = 0
    while i < len(lines):
        l = lines[i]
        if l.startswith('```'):
            inb = not inb
            i += 1
            continue
        if inb:
            n, j = l, i
            while n.endswith('\\') and j + 1 < len(lines):  # continued lines
                j += 1
                n = n[:-1] + ' ' + lines[j]
            out.append((i + 1, n))
            i = j + 1
            continue
        if l.strip():
            if not para: start = i + 1
            para.append(l.strip())
        if not l.strip() or i + 1 == len(lines):
            text = ' '.join(para)
            for m in re.finditer(r'`([^`]+)`', text):
                out.append((start, m.group(1)))
            para = []
        i += 1
    return out

bad, seen = [], 0
for page in pages:
    name = os.path.relpath(page, os.path.dirname(os.path.dirname(page))) if '/docs/' in page else os.path.basename(page)
    for line, text in fragments(page):
        text = re.sub(r'(^|\s)#.*$', '', text)  # a comment
        ms = list(re.finditer(r'(?:^|[\s(])stager\s+([a-z][a-z-]*)', text))
        for k, m in enumerate(ms):
            cmd = m.group(1)
            rest = text[m.end():ms[k + 1].start() if k + 1 < len(ms) else len(text)]
            rest = re.split(r'[|;&)`]|\s--(?:\s|$)|\$\(', rest)[0]
            seen += 1
            if cmd not in helps:
                bad.append('%s:%d: stager %s: no such command (%s)' % (name, line, cmd, text.strip()))
                continue
            for o in re.findall(r'(?<![\w$/.-])(--?[a-zA-Z][\w-]*)', rest):
                if listed(o, helps[cmd]):
                    continue
                if o in short and listed(short[o], helps[cmd]):
                    continue
                bad.append('%s:%d: stager %s %s: not in `stager %s --help`' % (name, line, cmd, o, cmd))
print('%d stager commands checked in %d pages' % (seen, len(pages)))
for b in bad: print(b)
sys.exit(1 if bad or seen < 50 else 0)
PY
	echo "$output"
	[ "$status" -eq 0 ]
}

@test "docs: every relative link of README.md and docs/*.md reaches a file (and its heading)" {
	run python3 - "$DOCS_TOP/README.md" "$DOCS_TOP"/docs/*.md <<'PY'
import os, re, sys
def anchors(path):
    a = set()
    for l in open(path):
        m = re.match(r'#+\s+(.*)', l)
        if m:
            s = m.group(1).strip().lower()
            s = re.sub(r'[^\w\- ]', '', s)
            a.add(s.replace(' ', '-'))
    return a
bad, n = [], 0
for page in sys.argv[1:]:
    inb = False
    for i, l in enumerate(open(page), 1):
        if l.startswith('```'):
            inb = not inb
        if inb:
            continue
        for t in re.findall(r'\]\(([^)\s]+)\)', l):
            if re.match(r'[a-z]+:', t):
                continue
            n += 1
            f, _, h = t.partition('#')
            target = os.path.normpath(os.path.join(os.path.dirname(page), f)) if f else page
            if not os.path.exists(target):
                bad.append('%s:%d: %s: no such file' % (page, i, t))
            elif h and target.endswith('.md') and h not in anchors(target):
                bad.append('%s:%d: %s: no such heading' % (page, i, t))
print('%d links checked' % n)
for b in bad: print(b)
sys.exit(1 if bad else 0)
PY
	echo "$output"
	[ "$status" -eq 0 ]
}

@test "docs: the README's Python training loop runs as written, on a pack of images" {
	[ -x /usr/bin/python3 ] || skip "needs Debian's python3"
	local top
	top=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	awk '/^```python[ \t]*$/ { n++; inb = 1; next } inb && /^```/ { inb = 0; next } inb' \
		"$DOCS_TOP/README.md" >train.py
	[ "$(grep -c 'PackDataset' train.py)" -ge 2 ]
	# the fast form: spawn workers kept across epochs (else each epoch's
	# new workers import torch again: 43.7 s against 9.1 s)
	grep -q 'persistent_workers=True' train.py
	# CLASS/IMAGE.png, two classes the model can tell apart
	/usr/bin/python3 -c '
from PIL import Image
import os
for c, v in (("cats", 30), ("dogs", 200)):
    os.makedirs("tree/" + c)
    for i in range(24):
        Image.new("L", (16, 16), v + i).save("tree/%s/%02d.png" % (c, i))'
	"$STAGER" pack -q tree -o dataset.tar.zst
	run env PYTHONPATH="$top/${B:-build}/python" timeout 300 "${PY3:-/usr/bin/python3}" train.py
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | grep -c '^epoch [0-2]: loss ')" -eq 3 ]
	[ -s ckpt.pt ]
}

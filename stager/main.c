/*
 * main.c - stager's command table and dispatch.
 *
 * Every command of DESIGN.md is in the table from the start, with its help;
 * a command that is not built yet says so and exits 1 rather than pretend.
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#define GLOBALS_NOTE ""

const cli_cmd cli_commands[] = {
        {"pack", cmd_pack, "pack a directory into one verified .tar.zst",
         "usage: stager pack DIR [-o OUT.tar.zst] [--base OLD.tar.zst]... [--level N]\n"
         "                   [--threads N] [--json]\n"
         "\n"
         "Pack the tree at DIR into one compressed file that plain `tar --zstd -xf`\n"
         "can read, with independent zstd frames and a trailer (manifest with an\n"
         "XXH3-128 per file, SHA-256 of the pack) so stager can extract it in\n"
         "parallel, extract parts of it, and verify every byte.  Stage packs, not\n"
         "trees: one file costs the shared filesystem a handful of operations.\n"
         "\n"
         "Files, directories (empty ones too), symlinks, hardlinks, permission bits\n"
         "and mtimes are kept; sockets, FIFOs and devices are skipped with a warning.\n"
         "The same tree gives the same digest.  The pack is written under a\n"
         "temporary name and renamed when complete.\n"
         "\n"
         "  -o, --output FILE   where to write (default: DIR.tar.zst beside DIR)\n"
         "  -l, --level N       zstd level 1-19 (default 3)\n"
         "  -j, --threads N     compression threads (default: one per CPU)\n"
         "      --frame-size S  uncompressed bytes per frame (default: 256K, or\n"
         "                      larger, up to 4M, for a tree over 16G; a larger\n"
         "                      frame compresses text a little better, a smaller\n"
         "                      one serves random reads of a mount faster)\n"
         "      --fsync         make the pack durable (fsync) before renaming it\n"
         "                      into place\n"
         "      --base OLD      also write a delta from the older version OLD (a\n"
         "                      pack) beside OUT, named OUT.delta-<OLD's digest>;\n"
         "                      may be repeated\n"
         "      --json          print a JSON summary on stdout\n"
         "\n"
         "A delta holds what a node that has OLD in its cache lacks: librsync\n"
         "deltas of changed files, new files whole, the list of removed ones.\n"
         "`stager stage OUT` on such a node reads the delta instead of OUT and\n"
         "checks every file against OUT's manifest; anywhere else, or if the delta\n"
         "is missing or damaged, it reads OUT.  Keep the delta files beside OUT.\n"
         "\n"
         "Prints \"DIGEST  OUT\" on stdout.\n"},
        {"verify", cmd_verify, "check a pack's SHA-256 and every file's XXH3",
         "usage: stager verify PACK [--json]\n"
         "\n"
         "Read the whole pack once and check the SHA-256 of its frames against\n"
         "the trailer, that every frame decodes, and every file's XXH3-128.\n"
         "The delta files the pack lists (stager pack --base) are checked as far as\n"
         "they can be without their bases: header, structure, records against the\n"
         "manifest, new files' XXH3-128, checksum; a missing one is a warning.\n"
         "Exit 0 if intact; 4 naming the first problem (file, frame, expected and\n"
         "found), or a damaged delta; 2 if PACK is missing or unreadable.\n"
         "\n"
         "  -j, --threads N     decoding threads (default: one per CPU)\n"
         "      --json          print a JSON result on stdout\n"},
        {"ls", cmd_ls, "list a pack's contents from its trailer",
         "usage: stager ls PACK [--long] [--json]\n"
         "\n"
         "List the contents of a pack from its trailer alone: one small read at\n"
         "the end of the file, whatever the pack's size.  Directories end in '/'.\n"
         "\n"
         "  -l, --long          mode, size, mtime and link targets, like `tar -tv`\n"
         "      --json          the digest, totals and every entry as JSON (with\n"
         "                      --long, also the frame table)\n"},
        {"unpack", cmd_unpack, "extract a pack into a new directory, verified",
         "usage: stager unpack PACK DIR [--include GLOB]...\n"
         "\n"
         "Extract PACK into DIR, which must not exist (or be empty).  Frames are\n"
         "decoded and files written in parallel; every file is checked against its\n"
         "XXH3-128 as it is written and the pack's SHA-256 is checked; the tree is\n"
         "built in a temporary sibling (.stager-unpack.*) and renamed to DIR only\n"
         "when everything checked out.  Extraction is secure: absolute paths, '..',\n"
         "symlinks or hardlinks leading outside DIR and device nodes are refused,\n"
         "setuid and setgid bits are dropped.\n"
         "\n"
         "  -i, --include GLOB  extract only matching paths (a directory brings its\n"
         "                      subtree; repeatable); only the frames that hold them\n"
         "                      are decoded\n"
         "  -j, --threads N     threads (default: one per CPU)\n"},
        {"stage", cmd_stage, "make a dataset available on this node (cached)",
         "usage: stager stage SRC [DEST] [--include GLOB]... [--verify] [--copy]\n"
         "                    [--no-pin] [--all-nodes] [--json]\n"
         "\n"
         "Make the dataset SRC available on this node through the per-node cache\n"
         "and print the staged path, so `DATA=$(stager stage ~/data/ds.tar.zst)`\n"
         "works.  SRC is a pack (the fast path), any archive libarchive reads\n"
         "(tar, tar.gz, tar.zst, zip, 7z, ...), or a plain directory (which costs a\n"
         "walk of the tree on the shared filesystem every time: pack it).\n"
         "\n"
         "The cache lives under the scratch root (scratch_root, --scratch, else\n"
         "/disk/scratch/$USER, /scratch-ssd/$USER, $TMPDIR/stager-$USER), one entry\n"
         "per pack digest, verified before it is published and read-only.  A warm\n"
         "stage costs one stat() of SRC on the shared filesystem.  Concurrent stages\n"
         "of one pack on a node read it once: the others wait and reuse it.  Least\n"
         "recently used entries are evicted to respect cache_max and min_free; an\n"
         "entry in use by a live job (a pin) never is.\n"
         "\n"
         "DEST defaults to $SLURM_TMPDIR/NAME, else a job directory under the\n"
         "scratch root (removed by `stager clean` once the job is gone).  DEST is a\n"
         "symbolic link to the read-only entry unless --copy.\n"
         "\n"
         "  -i, --include GLOB  stage a subset of a pack (only its frames are read)\n"
         "      --verify        re-check a cached entry's files before using it\n"
         "      --copy          a private writable copy (reflinked where possible)\n"
         "      --no-pin        do not pin the entry for this job\n"
         "      --json          print {path, digest, hit, source_bytes, seconds, ...}\n"
         "      --all-nodes     on every node of the Slurm allocation, reading SRC once\n"
         "\n"
         "--all-nodes (in a job with several nodes): this node reads the pack from\n"
         "the shared filesystem once, Slurm's sbcast sends it to the nodes whose\n"
         "cache lacks it (not compressed again), and every node stages from its copy\n"
         "(srun, one task per node), checking its SHA-256 and every file first; a\n"
         "node whose copy fails reads SRC itself, with a warning.  DEST (the same\n"
         "path on every node) must be node-local.  With --json, says for each node\n"
         "how it got the data (cached, sbcast, read, shared).  SRC that is not a pack\n"
         "is staged by each node on its own.\n"
         "\n"
         "Exit: 2 SRC missing, 3 no room even after eviction (nothing copied), 4 a\n"
         "damaged pack or hostile archive (nothing published).\n"},
        {"collect", cmd_collect, "copy results back to the shared filesystem",
         "usage: stager collect SRC DEST [--pack] [--every INTERVAL] [--level N]\n"
         "                      [--json]\n"
         "       stager collect --kept [--job ID] [--json]\n"
         "\n"
         "Copy the directory SRC (results on scratch) to DEST (on the shared\n"
         "filesystem), like `rsync -a SRC/ DEST/`, but:\n"
         "\n"
         "  - incremental without asking the shared filesystem: a record on scratch\n"
         "    says what DEST already holds, so an unchanged re-run reads and writes\n"
         "    nothing there, and a changed file alone is sent again;\n"
         "  - atomic per file: each is written as .stager-tmp.* beside its final\n"
         "    name and renamed, so DEST never shows a partial file; a collect killed\n"
         "    at any moment is completed by the next one;\n"
         "  - free space and inodes of DEST are checked before anything is written;\n"
         "  - transient errors (ESTALE, EIO, EAGAIN, ...) are retried with backoff;\n"
         "  - within the node's shared-FS slots and the bandwidth and operations\n"
         "    limits.\n"
         "Files removed from SRC stay in DEST: collect never deletes results.\n"
         "DEST takes sbatch's file-name patterns: %j the job id, %A and %a the\n"
         "array's job id and task id, %N the node's name, %n its index in the job,\n"
         "%u the user, %x the job's name, %% a % (one not known here is an error).\n"
         "\n"
         "      --pack            write one verified pack, DEST.tar.zst, instead of\n"
         "                        a tree of files (for inode quotas); it is rebuilt\n"
         "                        when anything in SRC changed\n"
         "      --level N         the pack's zstd level (default 3)\n"
         "      --every INTERVAL  collect now and then every INTERVAL (e.g. 10m), with\n"
         "                        idle I/O priority, until SIGTERM/SIGINT/SIGHUP; then\n"
         "                        collect once more and exit 0 (SIGUSR1 or SIGUSR2:\n"
         "                        collect now)\n"
         "      --json            print {src, dest, files, sent_files, sent_bytes,\n"
         "                        unchanged, retries, failed, seconds, ...}\n"
         "      --kept            send the results that jobs on this node could not\n"
         "                        collect (SCRATCH_ROOT/kept/, see clean) to the DEST\n"
         "                        each was meant for; each one sent whole is removed;\n"
         "                        with none here (a login node), names the nodes\n"
         "                        that hold them and the command to run there\n"
         "      --job ID          with --kept: only those of Slurm job ID (the epilog\n"
         "                        sends a job's kept results as soon as it ends)\n"
         "In a Slurm job, SRC is noted as results the job has yet to collect: if\n"
         "the job is killed before they reach DEST, the epilog keeps them on the\n"
         "node (kept/), sends them, and notes in ~/.local/state/stager/kept/ what\n"
         "it could not send (stager status lists them from any node).\n"
         "\n"
         "Exit: 2 SRC missing, 3 DEST cannot fit the results (the figures are given;\n"
         "nothing written), 5 interrupted (what was collected is complete), 7 files\n"
         "that could not be written (named; the others were collected).\n"},
        {"run", cmd_run, "stage, run a command, collect, clean up",
         "usage: stager run [--stage SRC[:DEST]]... [--mount PACK[:DIR]]... [--env ENV_DIR]...\n"
         "                  [--collect SRC:DEST]... [--every INTERVAL] [--pack]\n"
         "                  [--grace TIME] [--all-nodes] -- CMD [ARG]...\n"
         "\n"
         "The wrapper for batch scripts.  Stages each --stage SRC (at DEST, else\n"
         "in the job directory) and exports its path as STAGER_DATA, STAGER_DATA_2,\n"
         "...; mounts each --mount PACK (at DIR, else its name in the job\n"
         "directory; packs given with one DIR make one tree there, and a PACK\n"
         "such as 'shards/*.tar.zst' stands for the packs it matches; see `stager\n"
         "mount`) for CMD's lifetime and exports each DIR as\n"
         "STAGER_MOUNT, STAGER_MOUNT_2, ... (the mount's process ignores the job's\n"
         "signals, so CMD keeps its data to the end; it is unmounted after CMD,\n"
         "always); makes each --collect SRC (relative to the job directory unless\n"
         "absolute) and exports it as STAGER_OUT, STAGER_OUT_2, ...; exports the\n"
         "job directory as STAGER_JOB_DIR ($SLURM_TMPDIR, else one under the\n"
         "scratch root); runs CMD; then collects each SRC to its DEST and removes\n"
         "what it made on scratch.  --collect splits at the first ':' (DEST may\n"
         "hold colons, as timestamps do; a ':' in SRC is written '\\:'); DEST takes\n"
         "sbatch's patterns (%j, %a, %A, %N, %n, %u, %x: see collect), so array\n"
         "tasks keep apart: --collect \"out:$HOME/res/%A-%a\".\n"
         "\n"
         "Nothing uncollected is lost: results whose collect failed are moved to\n"
         "SCRATCH_ROOT/kept/ on this node (named); if stager or the job is killed\n"
         "before its last collect ended (Slurm's SIGKILL after KillWait), the next\n"
         "`stager clean` (the epilog's) moves them there.  They stay keep_days\n"
         "(14); the next `stager run` on the node, or `stager collect --kept`,\n"
         "sends them to their DEST.\n"
         "\n"
         "Signals: SIGTERM, SIGINT and SIGHUP (scancel, the time limit) are passed\n"
         "to CMD; results are collected when CMD has exited, or after --grace if\n"
         "it takes longer (and again when it has exited).\n"
         "SIGUSR1 and SIGUSR2 (the early warning of `#SBATCH --signal=B:USR1@120`)\n"
         "collect at once and are passed to CMD if it handles them (to checkpoint);\n"
         "one that does not, which they would kill, keeps running.  Write `exec\n"
         "stager run ...` in the batch script, so the B: signal reaches stager\n"
         "(run warns when it is not the script's main process).  In a job, run\n"
         "reads the time limit, KillWait and the script's --signal, and collects\n"
         "before the limit on its own, with a warning, when the last collect\n"
         "would not fit.\n"
         "\n"
         "      --every INTERVAL  also collect every INTERVAL while CMD runs (idle\n"
         "                        I/O priority), so even SIGKILL loses at most one\n"
         "                        interval of results; in a job with a time limit\n"
         "                        the default is a tenth of the time left (1 to 30\n"
         "                        minutes); 0: only at the end\n"
         "      --pack            collect each SRC as one pack, DEST.tar.zst\n"
         "      --mount PACK[:DIR]  mount PACK instead of staging it (read on demand;\n"
         "                        for data larger than scratch, or read in part);\n"
         "                        a pattern ('shards/*.tar.zst') mounts the packs\n"
         "                        it matches as one tree\n"
         "      --env ENV_DIR     serve the Python env ENV_DIR from this node, at its\n"
         "                        own path, for CMD's lifetime (see `stager env`)\n"
         "      --grace TIME      after passing SIGTERM on, how long to give CMD to\n"
         "                        exit before collecting anyway (default 5s)\n"
         "      --all-nodes       on every node of the job (see below)\n"
         "\n"
         "--all-nodes (in a job with several nodes; CMD is typically `srun ...`):\n"
         "each SRC is staged on every node with one read of the shared filesystem\n"
         "(as `stager stage --all-nodes`), and a collector on every node (an srun\n"
         "step that shares the job's resources) makes each --collect SRC and\n"
         "collects that node's results: every INTERVAL, at the early warning, when\n"
         "Slurm stops the job (on each node, within KillWait) and when CMD ends.\n"
         "DEST with %N (the node's name) or %n (its index) keeps the nodes' results\n"
         "apart (`--collect out:/results/%N`); without it they are merged into DEST\n"
         "(a name written by several nodes keeps one of them).  --pack needs one.\n"
         "\n"
         "Exit: CMD's status (128+N if a signal N ended it); 5 if stager itself was\n"
         "told to stop (SIGTERM, SIGINT, SIGHUP); a staging failure's status (CMD is\n"
         "not run); a collect failure's status if CMD succeeded.\n"},
        {"push", cmd_push, "upload a dataset over ssh (delta, verified, resumable)",
         "usage: stager push LOCAL [USER@]HOST:PATH [--pack] [--replace] [--rsh CMD]\n"
         "                   [--remote-stager PATH] [--level N] [--checksum] [--json]\n"
         "\n"
         "Send the directory LOCAL to PATH on HOST, a better `scp -r`: stager runs\n"
         "`ssh HOST stager serve` and speaks a framed, checked protocol with it.\n"
         "\n"
         "  - only what PATH lacks crosses: a file PATH already has (same size and\n"
         "    XXH3) costs nothing, a changed one a librsync delta against PATH's old\n"
         "    version (the far end sends its signature), a new one its zstd-compressed\n"
         "    content;\n"
         "  - verified: every file against its XXH3-128, the whole tree against the\n"
         "    sender's SHA-256, before anything is published; a file either end\n"
         "    finds as stager last read or wrote it (same inode, size, mtime, ctime\n"
         "    and mode) is taken to hold the bytes it held then, as rsync's quick\n"
         "    check does, unless --checksum; an unchanged tree costs only stats;\n"
         "  - atomic: the new version is built beside PATH and switched with it in one\n"
         "    step (renameat2 RENAME_EXCHANGE; on NFS, CephFS or GlusterFS the old one\n"
         "    is renamed aside first, and PATH is absent for a moment); readers see\n"
         "    the old tree or the new one, and an interrupted push (even kill -9 of\n"
         "    either end) leaves PATH as it was;\n"
         "  - resumable: completed files stay in PATH's sibling .stager-partial.NAME,\n"
         "    and the next push sends only what is missing;\n"
         "  - confined: the far end writes nothing outside PATH (and that sibling),\n"
         "    whatever the client sends.\n"
         "PATH's parent directory must exist; PATH is replaced by LOCAL's tree\n"
         "(files removed from LOCAL disappear from PATH).  A relative PATH, or one\n"
         "that starts with ~/, is under the remote home directory.  A PATH written\n"
         "as a directory (HOST:DIR/, HOST:~ or HOST:.) means into it: DIR/NAME, NAME\n"
         "being LOCAL's last component, as with scp.  An existing PATH is replaced\n"
         "only if stager published it there (the record .stager-published.NAME\n"
         "beside it) or it is empty; else push refuses (exit 1) unless --replace is\n"
         "given.  A home directory is never replaced.  LOCAL must be a directory:\n"
         "single files cannot be pushed; push the directory that holds the file.\n"
         "\n"
         "  -e, --rsh CMD            the transport instead of `ssh` (like rsync's -e),\n"
         "                           e.g. \"ssh -p 2222 -i ~/.ssh/cluster\"; also\n"
         "                           $STAGER_RSH\n"
         "      --remote-stager PATH where stager is on HOST (default: the\n"
         "                           remote_stager setting, $STAGER_REMOTE_STAGER,\n"
         "                           else stager on the remote PATH)\n"
         "      --level N            zstd level of the data sent (default 3; data\n"
         "                           that does not compress goes as it is)\n"
         "      --bwlimit RATE       at most RATE bytes per second on the wire (e.g. 10M)\n"
         "      --json               print {files, whole_files, delta_files,\n"
         "                           resumed_files, resumed_bytes, reused_files,\n"
         "                           wire_bytes, seconds, ...}\n"
         "      --pack               store one verified pack, PATH.tar.zst (PATH if it\n"
         "                           ends so), ready for `stager stage`, instead of a\n"
         "                           tree; the old pack's files are the delta basis\n"
         "      --replace            replace an existing PATH that stager did not\n"
         "                           publish (not a home directory)\n"
         "      --checksum           read and hash every file on both ends, trusting\n"
         "                           no stat-keyed index (like rsync -c); the far end's\n"
         "                           stager must know it\n"
         "\n"
         "Exit: 1 PATH exists and may not be replaced, 2 LOCAL missing, 3 no room at\n"
         "the far end, 4 data damaged in transit (nothing published), 5 interrupted,\n"
         "6 transport or far-end failure, 7 a file of LOCAL changed while it was sent\n"
         "(push again).\n"},
        {"pull", cmd_pull, "download a dataset over ssh",
         "usage: stager pull [USER@]HOST:PATH LOCAL [--replace] [--rsh CMD]\n"
         "                   [--remote-stager PATH] [--level N] [--checksum] [--json]\n"
         "\n"
         "The reverse of push: HOST sends the directory PATH and LOCAL is built,\n"
         "verified and switched the same way (deltas against LOCAL's files, a partial\n"
         "directory .stager-partial.NAME beside LOCAL for resuming, atomic switch).\n"
         "LOCAL follows PATH's rules: LOCAL/ or . means into it, and an existing\n"
         "directory that stager did not pull there is replaced only with --replace.\n"
         "The options are push's (but --pack).\n"},
        {"serve", cmd_serve, "the far end of push and pull (started over ssh)",
         "usage: stager serve\n"
         "\n"
         "Speak stager's transfer protocol on stdin and stdout: started by push and\n"
         "pull through ssh (`ssh HOST stager serve`), not by hand.  The client names\n"
         "the path; errors go back to it over the protocol.\n"},
        {"status", cmd_status, "show the node cache, pins, space and settings",
         "usage: stager status [PACK]... [--json]\n"
         "\n"
         "Show the scratch root, its filesystem's size and free space, the cache\n"
         "entries (digest, kind, source, size, last use, pins with their owners and\n"
         "whether they are alive), the quotas, and every effective setting with\n"
         "where it came from.\n"
         "\n"
         "With PACKs: for each, its digest, whether this node caches it, the older\n"
         "versions it has deltas from (the delta file, its size, whether that version\n"
         "is cached here, and what is wrong with the file if anything), and what a\n"
         "stage on this node would read: nothing, the delta, or the whole pack.\n"},
        {"clean", cmd_clean, "remove what no live job owns from scratch",
         "usage: stager clean [--dry-run] [--all] [--older-than AGE] [--job ID] [--kept]\n"
         "                    [--json]\n"
         "\n"
         "Remove what no live job or process needs: builds left by dead stagers,\n"
         "stale pins, job directories of finished jobs (Slurm is asked when it is\n"
         "there; process liveness otherwise), cache entries down to the quotas, and\n"
         "lock files nobody holds.\n"
         "An entry pinned by a live owner is never removed.  Results that a finished\n"
         "job never fully collected (`stager run --collect`, killed before its last\n"
         "collect ended) are never removed: they move to SCRATCH_ROOT/kept/, where\n"
         "`stager collect --kept` (or the next `stager run` on the node) sends them\n"
         "to their DEST; clean lists them (\"keeping uncollected results\") and\n"
         "removes them after keep_days (14).\n"
         "\n"
         "  -n, --dry-run       change nothing; list what would go, with sizes\n"
         "      --all           also every unpinned cache entry\n"
         "      --older-than AGE  also entries unused for AGE (e.g. 7d)\n"
         "      --job ID        what Slurm job ID left (its pins and job directory),\n"
         "                      alive or not: for an epilog\n"
         "      --kept          also remove kept results now, whatever their age\n"
         "      --json          print what was removed and the bytes freed\n"},
        {"diff", cmd_diff, "what changed between two packs",
         "usage: stager diff OLD NEW [--json]\n"
         "\n"
         "Compare two packs from their trailers alone (one read at the end of each,\n"
         "no data): one line per difference, \"A path\" added, \"D path\" removed,\n"
         "\"M path (content, mode, type, link)\" changed, and a summary with the\n"
         "bytes.  Content is compared by size and XXH3-128; an mtime alone is not a\n"
         "change.\n"
         "\n"
         "      --json  print {old, new, added, removed, changed, unchanged, bytes}\n"
         "\n"
         "Exit: 0 (differences or not), 2 a pack missing, 4 a damaged pack.\n"},
        {"doctor", cmd_doctor, "check this node's set-up and say what to fix",
         "usage: stager doctor [PATH]... [--hooks DIR] [--hook-user NAME] [--json]\n"
         "       stager doctor --prepare [--json]\n"
         "\n"
         "Check this node for stager: the configuration; the node's shared places\n"
         "(below: the scratch roots' parent, the reader slots); the scratch root (on\n"
         "a local disk, private, writable, its write and read throughput, free space\n"
         "and inodes against min_free); the Slurm job, $SLURM_TMPDIR and squeue;\n"
         "the cluster leases; and each PATH on the shared\n"
         "filesystem (default $HOME): its filesystem, the time of a stat(), and for\n"
         "a file its read throughput (up to 256 MiB, past the page cache where the\n"
         "kernel allows).  A path that does not answer within 30 s fails the check\n"
         "instead of hanging.  Each check prints ok, warn or FAIL and what to fix.\n"
         "\n"
         "As root, also the Slurm hooks (those slurm.conf names, from scontrol):\n"
         "each file root's and not writable by others, then a fake job's round\n"
         "trip (job id 4294967000 and up), each hook run as slurmd runs it (no\n"
         "PATH, no HOME, cwd /, killed after 60 s): the prolog as root, the task\n"
         "prolog as the job's user (its SLURM_TMPDIR a directory of that user's),\n"
         "the epilog as root (exit 0, nothing on stderr, the job's directory gone).\n"
         "What the round trip leaves is removed.\n"
         "\n"
         "The node's shared places are those no user can make safely for the\n"
         "others: the shared parent of the scratch roots (/scratch/stager for a\n"
         "site's scratch_root = /scratch/stager/$USER) and slot_dir.  Each must be\n"
         "root's, mode 1777; as root, a missing one is made so (and said:\n"
         "\"created\"), one another user made is named and left alone.\n"
         "\n"
         "      --prepare         only the node's shared places (the Slurm prolog runs\n"
         "                        it as root before every job); with -q, only what\n"
         "                        is wrong is printed\n"
         "      --hooks DIR       check DIR/prolog, DIR/task-prolog, DIR/epilog (as\n"
         "                        make install puts them in PREFIX/libexec/stager)\n"
         "      --hook-user NAME  the fake job's user (default nobody)\n"
         "      --json            print {checks: [{check, status, found, fix, hook?,\n"
         "                        job_dir?}], failed, warnings}\n"
         "\n"
         "Exit: 0 nothing failed (warnings allowed), 7 a check failed.\n"},
        {"mount", cmd_mount, "use a pack at once: a read-only tree, read on demand",
         "usage: stager mount PACK... MOUNTPOINT [--foreground] [--cache] [--cache-size SIZE]\n"
         "\n"
         "Serve PACK as a read-only tree at MOUNTPOINT (an empty directory of\n"
         "yours), without copying it and without building an index: the mount\n"
         "reads the trailer alone, so the first file is readable at once whatever\n"
         "the pack's size, and a read fetches and decodes only the frames it needs\n"
         "(within the reader slots and --bwlimit, like a stage), keeping recent\n"
         "ones in memory.  Every frame is checked before any of it is served (a\n"
         "file of a pack from an older stager is checked whole at its first read);\n"
         "a damaged frame fails the reads that need it (EIO) and is logged in\n"
         "SCRATCH_ROOT/mounts/log.  A pack the node cache holds is served from\n"
         "there, pinned while mounted.  `stager status` lists mounts, `stager\n"
         "umount` ends one, `stager clean` removes those whose process died.\n"
         "\n"
         "Several packs (the shards of a dataset: shards/*.tar.zst) make one tree:\n"
         "a directory that two of them hold is one directory; any other path that\n"
         "two of them hold is refused, naming it and both packs.  Packs of format\n"
         "1 or 2 (an older stager's) are mounted one at a time.\n"
         "\n"
         "      --foreground      serve in this process until unmounted or\n"
         "                        interrupted (default: in the background, once\n"
         "                        the tree can be read)\n"
         "      --cache           also keep the frames read in the node cache, within\n"
         "                        its quota (least recently used out first), for the\n"
         "                        mounts of later jobs on this node\n"
         "      --cache-size SIZE decoded frames kept in memory (default 256M)\n"
         "\n"
         "Exit: 0 mounted, 1 MOUNTPOINT not an empty directory or packs that clash,\n"
         "2 a PACK missing,\n"
         "4 not a pack or a hostile one, 7 FUSE could not mount.\n"},
        {"umount", cmd_umount, "end a mount made by stager mount",
         "usage: stager umount MOUNTPOINT\n"
         "\n"
         "Unmount a tree that `stager mount` serves (also one whose process died).\n"
         "Files still open under it stay readable until they are closed; the\n"
         "mount's process then ends.\n"},
        {"env", cmd_env, "serve a Python env from this node, at its own path",
         "usage: stager env ENV_DIR... [--foreground]\n"
         "\n"
         "Serve the Python environment ENV_DIR (a venv or a conda prefix on the\n"
         "shared filesystem) from this node for the rest of the job: its pack,\n"
         "ENV_DIR.tar.zst (made by `stager pack ENV_DIR`), is staged into the node\n"
         "cache and mounted read-only over ENV_DIR itself, so every process of the\n"
         "node (subprocesses, DataLoader workers, srun's tasks) imports from local\n"
         "disk, and shebangs, pyvenv.cfg, .pth files, RPATHs and conda's prefixes\n"
         "work unchanged.  Other nodes still see the shared filesystem: on a job\n"
         "of several nodes, `srun stager run --env ENV_DIR -- CMD` serves it on\n"
         "each.  Jobs of yours on one node that use the same pack share the mount;\n"
         "the last one to end unmounts it.\n"
         "\n"
         "Never stale: an env changed after its pack (bin, lib, conda-meta or\n"
         "lib/pythonX.Y/site-packages changed: a package installed, removed or\n"
         "upgraded) is refused with the command that packs it again.  An edit of a\n"
         "file inside a package, in place, is not seen: pack again after one.\n"
         "\n"
         "In a Slurm job it ends with the job (the epilog's clean unmounts what is\n"
         "left); elsewhere `stager umount ENV_DIR` ends it.  `stager status` lists\n"
         "it with the mounts.  Needs FUSE (/dev/fuse, fusermount3): without it,\n"
         "nothing is served and the env is used from the shared filesystem as is.\n"
         "\n"
         "      --foreground      serve in this process until unmounted or interrupted\n"
         "\n"
         "Exit: 0 served, 1 ENV_DIR not a directory of yours, 2 no pack or the env\n"
         "changed after it (the command to run is given), 4 a damaged pack, 7 FUSE\n"
         "could not mount, or another version of the pack is served there.\n"},
        {"where", cmd_where, "the nodes whose cache holds each pack (from Slurm)",
         "usage: stager where PACK... [-p PARTITION] [--json]\n"
         "\n"
         "List, for each pack, the nodes whose cache holds it for you, as Slurm sees\n"
         "them: one line \"PACK<TAB>NODE,NODE\" (\"-\" for none).  Works from a login\n"
         "node: it reads each pack's trailer (one read) and asks `sinfo` once.\n"
         "\n"
         "A node tells Slurm what its caches hold where the site set node_features =\n"
         "yes: when a job ends there, its epilog sets one node feature per user and\n"
         "pack (stg_ and 12 hex digits), at most node_features_max, shared fairly\n"
         "among the users with packs there (each one's most recent first, in turns).\n"
         "\n"
         "  -p, --partition P   only the nodes of partition P (default: $SBATCH_PARTITION,\n"
         "                      else every partition)\n"
         "      --json          {\"packs\": [{\"pack\", \"digest\", \"feature\", \"nodes\"}]}\n"
         "\n"
         "Exit: 0 (also when no node holds a pack), 2 a pack missing, 4 not a pack,\n"
         "6 Slurm could not be asked.\n"},
        {"hint", cmd_hint, "sbatch options that prefer the nodes caching packs",
         "usage: stager hint PACK... [-p PARTITION]\n"
         "\n"
         "Print the sbatch option that prefers the nodes whose cache holds the packs\n"
         "for you, or nothing when no node does (said on stderr).  Call it right\n"
         "before each sbatch: a hint kept from earlier may name a feature that has\n"
         "left since, which sbatch refuses (\"Requested node configuration is not\n"
         "available\").\n"
         "\n"
         "    sbatch $(stager hint ~/data/ds.tar.zst) job.sh\n"
         "\n"
         "sbatch's prefer option (Slurm 22.05 and later) tries those nodes first and\n"
         "does not hold the job for them when they are busy; a hinted job starts at\n"
         "a scheduling pass of Slurm's, not at submission (the backfill scheduler's\n"
         "every bf_interval, 30 s by default).  With several packs: A&B when a node\n"
         "holds all of them that some node holds, else A|B.  Only features that\n"
         "some node has right now are named (sbatch refuses any other), and a\n"
         "node keeps a feature\n"
         "node_features_grace seconds (default 60) after its pack left the cache,\n"
         "so the option stays valid between the hint and the sbatch; a feature in\n"
         "that grace is marked leaving and named by no new hint.  See `stager\n"
         "where` for how nodes tell Slurm what they cache.\n"
         "\n"
         "sbatch refuses a job whose preferred feature is on no node of the job's\n"
         "partition, so name that partition (#SBATCH -p in the script, say):\n"
         "\n"
         "    sbatch $(stager hint -p gpu ~/data/ds.tar.zst) job.sh\n"
         "\n"
         "  -p, --partition P   only features on nodes of partition P (default:\n"
         "                      $SBATCH_PARTITION, else every partition)\n"
         "\n"
         "Exit: 0 (also when nothing is printed), 2 a pack missing, 4 not a pack,\n"
         "6 Slurm could not be asked.\n"},
        {"features", cmd_features, "what this node tells Slurm it caches (the epilog's)",
         "usage: stager features\n"
         "       stager features --update --node NODE --user USER [--state-dir DIR]\n"
         "                       [--dry-run] < LIST\n"
         "\n"
         "The installed epilog's two halves of data gravity (see `stager where`).\n"
         "Without --update, as a user: the whole packs your cache on this node holds,\n"
         "as \"DIGEST LAST_USE\" lines, most recently used first, at most\n"
         "node_features_max, then a line \"end\"; only that line when your settings\n"
         "say node_features = no (how a user keeps their packs out).  A list without\n"
         "its end (a side that failed, or was stopped) takes none of yours away.\n"
         "\n"
         "With --update, as root: LIST (that output, for USER) on standard input\n"
         "becomes USER's part of the node's record in DIR (the features computed\n"
         "from the digests and USER's uid: a list names only USER's own), and the\n"
         "node's features\n"
         "in Slurm are set (scontrol update) when stager's part of them changed: the\n"
         "node_features_max, shared fairly among users (each one's most recent\n"
         "first, in turns), a feature that leaves\n"
         "kept node_features_grace seconds.  The site's own features are kept.\n"
         "Nothing happens unless the site's node_features is yes.\n"
         "\n"
         "      --node NODE     the node's name in Slurm ($SLURMD_NODENAME)\n"
         "      --user USER     whose list LIST is\n"
         "      --state-dir DIR root's own directory for the node's record\n"
         "                      (default /var/lib/stager; made 0700 if missing, and\n"
         "                      refused unless owned by root and writable by nobody\n"
         "                      else)\n"
         "      --dry-run       decide and say, but change nothing\n"},
        {NULL, NULL, NULL, NULL},
};

int cmd_not_built(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			break;
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			cli_print_help(cli_find(g_cmd));
			return EXIT_OK;
		}
	}
	cli_error("not built yet in this version of stager (%s); see 'stager --help' "
	          "for what is",
	          STG_VERSION_STRING);
	return EXIT_USAGE;
}

static void usage(FILE *f)
{
	fputs("usage: stager [GLOBAL OPTIONS] COMMAND [ARGS]\n"
	      "\n"
	      "Move training data between a cluster's shared filesystem and a compute\n"
	      "node's local disk: pack, stage, collect, clean.\n"
	      "\n"
	      "Commands:\n",
	      f);
	for (const cli_cmd *c = cli_commands; c->name; c++)
		fprintf(f, "  %-9s %s%s\n", c->name, c->summary,
		        c->run == cmd_not_built ? " (not built yet)" : "");
	fputs("\n"
	      "Global options: --quiet, --verbose, --progress=auto|bar|lines|none,\n"
	      "  --bwlimit RATE, --scratch DIR, --config FILE, --help, --version\n"
	      "\n"
	      "Exit status: 0 ok, 1 usage, 2 source missing or unreadable, 3 not enough\n"
	      "space, 4 integrity failure, 5 interrupted, 6 remote failure, 7 other I/O.\n"
	      "\n"
	      "'stager COMMAND --help' describes a command; `man stager` has it all.\n",
	      f);
}

static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la > 32 || lb > 32)
		return 99;
	size_t d[33][33];
	for (size_t i = 0; i <= la; i++)
		d[i][0] = i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = j;
	for (size_t i = 1; i <= la; i++)
		for (size_t j = 1; j <= lb; j++) {
			size_t c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
			if (d[i - 1][j] + 1 < c)
				c = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < c)
				c = d[i][j - 1] + 1;
			d[i][j] = c;
		}
	return d[la][lb];
}

/* A global option before the command failed, its message told: a
 * command asked for --json still gets its object (cli_finish). */
static int global_failed(int rc, int argc, char **argv, int from)
{
	for (int j = from; rc != EXIT_OK && j < argc; j++) {
		const cli_cmd *cmd = argv[j][0] == '-' ? NULL : cli_find(argv[j]);
		if (cmd) {
			cli_begin(cmd, argc - j, argv + j);
			return cli_finish(rc);
		}
	}
	return rc;
}

int main(int argc, char **argv)
{
	/* deep trees are walked with a descriptor per level */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max > 65536 ? 65536 : rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	int i = 1;
	/* global options before the command */
	for (; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return EXIT_OK;
		}
		if (!strcmp(a, "--version") || !strcmp(a, "-V")) {
			printf("stager %s (libstage %s)\n", STG_VERSION_CLI, stg_version());
			return EXIT_OK;
		}
		static const struct option lo[] = {CLI_GLOBAL_OPTIONS, {NULL, 0, NULL, 0}};
		const char *val = NULL;
		int code = !strcmp(a, "-q") ? 'q' : !strcmp(a, "-v") ? 'v' : -1;
		for (const struct option *o = lo; code == -1 && o->name; o++) {
			size_t n = strlen(o->name);
			if (strncmp(a + 2, o->name, n) || a[0] != '-' || a[1] != '-')
				continue;
			if (a[2 + n] == '\0') {
				code = o->val;
				if (o->has_arg) {
					if (i + 1 >= argc) {
						g_cmd = NULL;
						return cli_usage("%s needs a value", a);
					}
					val = argv[++i];
				}
			} else if (a[2 + n] == '=' && o->has_arg) {
				code = o->val;
				val = a + 3 + n;
			}
			if (code != -1)
				break;
		}
		g_cmd = NULL;
		if (code == -1 || code == OPT_HELP)
			return global_failed(cli_usage("unknown option '%s'", a), argc, argv,
			                     i + 1);
		int rc = cli_global_option(code, val);
		if (rc != -2)
			return global_failed(rc, argc, argv, i + 1);
	}
	if (i >= argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	const char *name = argv[i];
	if (!strcmp(name, "help")) {
		if (i + 1 < argc && cli_find(argv[i + 1])) {
			g_cmd = argv[i + 1];
			cli_print_help(cli_find(argv[i + 1]));
		} else {
			usage(stdout);
		}
		return EXIT_OK;
	}
	const cli_cmd *cmd = cli_find(name);
	if (!cmd) {
		fprintf(stderr, "stager: '%s' is not a stager command.", name);
		const cli_cmd *best = NULL;
		size_t bd = 3;
		for (const cli_cmd *c = cli_commands; c->name; c++) {
			size_t d = edit_distance(name, c->name);
			if (d < bd) {
				bd = d;
				best = c;
			}
		}
		if (best)
			fprintf(stderr, " Did you mean '%s'?", best->name);
		fprintf(stderr, "\nsee 'stager --help'\n");
		return EXIT_USAGE;
	}
	g_cmd = cmd->name;
	/* getopt names argv[0] in its messages */
	char prog[64];
	snprintf(prog, sizeof prog, "stager: %s", cmd->name);
	argv[i] = prog;
	cli_begin(cmd, argc - i, argv + i);
	return cli_finish(cmd->run(argc - i, argv + i));
}

#!/usr/bin/env bash
# A guard for every start-up and scale figure (issue 40): builds the reference commit REF beside the working tree
# (git worktree in a temporary directory, `make` there), builds the working tree, and runs bench/compare.py on
# both, interleaved: 1 and 8 workers against sh, plan, 1 GPU worker where a GPU exists, N agents start and stop
# (bench/scale.sh), peak RSS, kill -9 to restarted. It prints each figure's ratio to REF and exits 1 when any is
# more than 10% worse beyond noise (see compare.py), 2 when it cannot build or run.
#
# usage: bash bench/compare.sh [options] [REF]
#   REF               a commit (default: the last release tag, else 3ea4b4b, the build issue 40 measured)
#   --quick           CI's CPU figures: 9 rounds, 32 agents (3 runs each), no GPU figure
#   --rounds R        rounds of the per-launch figures (default 15)
#   --agents "N ..."  agent counts for bench/scale.sh (default "256 1024"; "" for none)
#   --agent-runs K    runs of each agent count per side (default 2)
#   --static          build both with `make static` (a binary that runs on another machine)
#   --ref-bin PATH    use this binary as the reference instead of building REF
#   --new-bin PATH    use this binary as the new side instead of building the working tree
#   --plant-sleep     the proof that it can fail: the new side is the working tree with a 20 ms sleep planted at
#                     the start of main() (a patched copy, built here); compare.sh must then exit 1
#   --keep DIR        leave the built binaries in DIR (ref/ddplaunch, new/ddplaunch)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
rounds=15 agents="256 1024" agent_runs=2 static=0 ref_bin="" new_bin="" plant=0 keep="" gpu=auto ref=""
while [ $# -gt 0 ]; do
    case $1 in
    --quick) rounds=9 agents=32 agent_runs=3 gpu=no ;;
    --rounds) rounds=$2; shift ;;
    --agents) agents=$2; shift ;;
    --agent-runs) agent_runs=$2; shift ;;
    --static) static=1 ;;
    --ref-bin) ref_bin=$2; shift ;;
    --new-bin) new_bin=$2; shift ;;
    --plant-sleep) plant=1 ;;
    --keep) keep=$2; shift ;;
    -h | --help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "compare.sh: unknown option $1" >&2; exit 2 ;;
    *) ref=$1 ;;
    esac
    shift
done
if [ -z "$ref" ] && [ -n "$ref_bin" ]; then
    ref=$ref_bin
elif [ -z "$ref" ]; then
    ref=$(git -C "$src" describe --tags --abbrev=0 2>/dev/null || echo 3ea4b4b)
fi
work=$(mktemp -d /tmp/ddpcompare-build.XXXXXX)
cleanup() {
    git -C "$src" worktree remove --force "$work/ref" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
jobs=$(nproc 2>/dev/null || echo 2)

# build DIR: `make` (or `make static`) there; echoes the binary's path
build() {
    if [ $static = 1 ]; then
        make -C "$1" -j"$jobs" static >"$work/build.log" 2>&1 || { tail -20 "$work/build.log" >&2; exit 2; }
        echo "$1/build/static/ddplaunch"
    else
        make -C "$1" -j"$jobs" build/ddplaunch >"$work/build.log" 2>&1 || { tail -20 "$work/build.log" >&2; exit 2; }
        echo "$1/build/ddplaunch"
    fi
}
# copy the working tree (tracked and untracked files that git does not ignore) to DIR
copy_tree() {
    mkdir -p "$1"
    (cd "$src" && git ls-files -z --cached --others --exclude-standard | xargs -0 tar -cf - 2>/dev/null) | tar -C "$1" -xf -
}

if [ -z "$ref_bin" ]; then
    git -C "$src" rev-parse --verify -q "$ref^{commit}" >/dev/null || { echo "compare.sh: no commit $ref here" >&2; exit 2; }
    echo "compare.sh: building $ref in $work/ref" >&2
    git -C "$src" worktree add --detach "$work/ref" "$ref" >/dev/null 2>&1 || { echo "compare.sh: git worktree add failed" >&2; exit 2; }
    ref_bin=$(build "$work/ref")
fi
if [ -z "$new_bin" ]; then
    if [ $plant = 1 ]; then
        copy_tree "$work/new"
        # the planted regression: 20 ms at the start of every launch
        sed -i 's/^    hold_std_fds();$/    hold_std_fds();\n    usleep(20000); \/* planted by bench\/compare.sh --plant-sleep *\//' \
            "$work/new/launcher/driver/main.c"
        grep -q "planted by bench" "$work/new/launcher/driver/main.c" || { echo "compare.sh: could not plant the sleep" >&2; exit 2; }
        echo "compare.sh: building the working tree with a 20 ms sleep planted in main()" >&2
        new_bin=$(build "$work/new")
    else
        echo "compare.sh: building the working tree" >&2
        new_bin=$(build "$src")
    fi
fi
if [ -n "$keep" ]; then
    mkdir -p "$keep/ref" "$keep/new"
    cp "$ref_bin" "$keep/ref/ddplaunch"
    cp "$new_bin" "$keep/new/ddplaunch"
fi
python3 "$src/bench/compare.py" --ref "$ref_bin" --new "$new_bin" --ref-name "$ref" --rounds "$rounds" \
    --agents "$agents" --agent-runs "$agent_runs" --gpu "$gpu"

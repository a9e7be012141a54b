#!/usr/bin/env bash
# Bash completion (completion/ddplaunch.bash) as a shell uses it: COMP_LINE/COMP_POINT in, COMPREPLY out
# (the text after the last '=' or ':', which is what readline replaces). Subcommands, every flag of --help,
# every key of --help-keys after --set, a choice key's values, flag values, file names, and nothing but
# file names after the program.
. "$DDP_SRCDIR/tests/integration/lib.sh"
cd "$DDP_SRCDIR"
. completion/ddplaunch.bash
COMP_WORDBREAKS=$' \t\n"\'><=;|&(:'
comp() { COMP_LINE=$1; COMP_POINT=${#COMP_LINE}; COMPREPLY=(); _ddplaunch; echo "${COMPREPLY[*]}"; }
expect_eq "subcommand" "$(comp "$DDP pl")" "plan"
expect_eq "subcommands" "$(comp "$DDP do" | tr ' ' '\n' | grep -x doctor)" "doctor"
expect_eq "report and ps" "$(comp "$DDP re" | tr ' ' '\n' | grep -x report)$(comp "$DDP p" | tr ' ' '\n' | grep -x ps)" \
    "reportps"
expect_eq "every subcommand" "$(comp "$DDP " | tr ' ' '\n' | grep -xE 'plan|topo|doctor|report|ps' | sort | xargs)" \
    "doctor plan ps report topo"
expect_eq "--console values" "$(comp "$DDP --console ")" "auto raw lines"
expect_eq "after report: its directory" "$(comp "$DDP report tests/fixtures/to")" "tests/fixtures/topo"
expect_eq "flag" "$(comp "$DDP --nproc")" "--nproc-per-node"
expect_eq "flag after a command" "$(comp "$DDP plan --topo")" "--topology"
expect_eq "--set key" "$(comp "$DDP --set job.nproc_p")" "job.nproc_per_node="
expect_eq "--set keys" "$(comp "$DDP --set restart.on_")" "restart.on_failure= restart.on_timeout="
expect_eq "--set choice" "$(comp "$DDP --set restart.on_timeout=d")" "downsize"
expect_eq "--set= choice" "$(comp "$DDP --set=restart.on_timeout=")" "restart downsize fail"
expect_eq "flag value" "$(comp "$DDP --nproc-per-node g")" "gpu"
expect_eq "--share-gpus" "$(comp "$DDP --share")" "--share-gpus"
expect_eq "gpus.share values" "$(comp "$DDP --set gpus.share=")" "yes no"
expect_eq "numa binding" "$(comp "$DDP --numa-binding core")" "core-complex"
expect_eq "topology files" "$(comp "$DDP --topology tests/fixtures/topo/2s-4gpu-n")" \
    "tests/fixtures/topo/2s-4gpu-nolocality.xml"
expect_eq "file names" "$(comp "$DDP examples/train_d")" "examples/train_ddp.py"
expect_eq "after the script: the program's words" "$(comp "$DDP examples/train_ddp.py --st")" ""
expect_eq "after JOB.ini: options" "$(comp "$DDP examples/job.ini --max-r")" "--max-restarts"

# every flag of --help, every key of --help-keys
want=$("$DDP" --help | grep -oE '^  (-[a-zA-Z], |    )--[a-z-]+' | grep -oE -- '--[a-z-]+' | sort)
got=$(comp "$DDP --" | tr ' ' '\n' | sort)
expect_eq "every flag" "$got" "$want"
want=$("$DDP" --help-keys | awk '/^\[[a-z_]+\]$/ { s = substr($0, 2, length($0) - 2) } /^  [a-z_]+ / { print s "." $1 "=" }' | sort)
got=$(comp "$DDP --set " | tr ' ' '\n' | sort)
[ "$(echo "$want" | wc -l)" -ge 40 ] || fail "--help-keys listed too few keys"
expect_eq "every key" "$got" "$want"

# issue 43 item 12: a command's own options after it (ps and topo do not take a launch's), and directories only
# after report.
expect_eq "ps options" "$(comp "$DDP ps --" | tr ' ' '\n' | sort | xargs)" "--help --json"
got=$(comp "$DDP topo --" | tr ' ' '\n' | sort | xargs)
want=$("$DDP" topo --help | grep -oE '^  (-[a-zA-Z], |    )--[a-z-]+' | grep -oE -- '--[a-z-]+' | sort | xargs)
expect_eq "topo options (its --help's)" "$got" "$want"
case " $got " in *" --max-restarts "* | *" --nnodes "*) fail "topo offers a launch's options: $got" ;; esac
expect_eq "report options" "$(comp "$DDP report --" | tr ' ' '\n' | sort | xargs)" "--help --svg"
expect_eq "after report: directories only" "$(comp "$DDP report tests/fixtures/golden/" | tr ' ' '\n' | sort | xargs)" \
    "tests/fixtures/golden/out tests/fixtures/golden/runs"
echo "completion: ok"

# bash completion for ddplaunch(1). Installed as share/bash-completion/completions/ddplaunch.
# Subcommands, flags (read from `ddplaunch --help`), `--set SECTION.KEY=` keys and their choices (read from
# `ddplaunch --help-keys`, the key table of the binary being completed), values of a few flags, and file
# names. Needs only bash's own compgen/complete; the lists are read once per shell and binary.

# The subcommands (cli.c's table: plan, topo, doctor, report, ps).
_ddplaunch_commands="plan topo doctor report ps"

# _ddplaunch_lists BINARY: fill _ddplaunch_flags, _ddplaunch_argflags, _ddplaunch_keys, _ddplaunch_choices.
_ddplaunch_lists() {
    [ "${_ddplaunch_for-}" = "$1" ] && return 0
    _ddplaunch_for=$1
    _ddplaunch_flags=() _ddplaunch_argflags=() _ddplaunch_keys=()
    declare -gA _ddplaunch_choices=()
    local line name
    # option lines: "  -r, --redirects 0-3|R:V,...   help" or "      --standalone   help"; a single space
    # and a word after the name: the flag takes an argument
    local re_opt='^  (-[a-zA-Z], |    )--([a-z][a-z-]*)( [^ ])?' re_sec='^\[([a-z_]+)\]$'
    local re_key='^  ([a-z_]+) +([^ ]+) +\[' re_word='^[a-z][a-z-]*$'
    while IFS= read -r line; do
        [[ $line =~ $re_opt ]] || continue
        name=--${BASH_REMATCH[2]}
        _ddplaunch_flags+=("$name")
        [ -n "${BASH_REMATCH[3]}" ] && _ddplaunch_argflags+=("$name")
    done < <("$1" --help 2>/dev/null)
    local section="" type alt ok
    while IFS= read -r line; do
        if [[ $line =~ $re_sec ]]; then
            section=${BASH_REMATCH[1]}
        elif [[ -n $section && $line =~ $re_key ]]; then
            name=$section.${BASH_REMATCH[1]} type=${BASH_REMATCH[2]}
            _ddplaunch_keys+=("$name=")
            # choice types ("restart|downsize|fail", "yes|no") complete their words
            if [[ $type == *"|"* ]]; then
                ok=1
                for alt in ${type//|/ }; do [[ $alt =~ $re_word && $alt != port ]] || ok=0; done
                [ $ok = 1 ] && _ddplaunch_choices[$name]=${type//|/ }
            fi
        fi
    done < <("$1" --help-keys 2>/dev/null)
}

# _ddplaunch_cmd_flags BINARY COMMAND: the flags COMMAND's own help lists (topo, report and ps take only those),
# one per line.
_ddplaunch_cmd_flags() {
    local line re_opt='^  (-[a-zA-Z], |    )--([a-z][a-z-]*)'
    while IFS= read -r line; do
        [[ $line =~ $re_opt ]] && echo "--${BASH_REMATCH[2]}"
    done < <("$1" "$2" --help 2>/dev/null)
}

_ddplaunch() {
    # Words split at blanks only (bash also splits at '=' and ':'; those pieces are put back together here and
    # taken off the answers at the end, as readline replaces only the text after the last '=' or ':').
    local line=${COMP_LINE:0:COMP_POINT}
    local -a words
    read -ra words <<<"$line"
    [[ -z $line || $line == *[[:blank:]] ]] && words+=("")
    local cword=$((${#words[@]} - 1))
    local cur=${words[cword]} prev=
    ((cword > 0)) && prev=${words[cword - 1]}
    local bin
    bin=$(type -P -- "${words[0]}" 2>/dev/null) || bin=ddplaunch
    _ddplaunch_lists "$bin"
    COMPREPLY=()
    _ddplaunch_answer
    local brk=
    [[ $COMP_WORDBREAKS == *=* || $COMP_WORDBREAKS == *:* ]] && [[ $cur == *[=:]* ]] && brk=${cur%"${cur##*[=:]}"}
    if [ -n "$brk" ]; then
        local k
        for k in "${!COMPREPLY[@]}"; do COMPREPLY[k]=${COMPREPLY[k]#"$brk"}; done
    fi
    return 0
}

# Fill COMPREPLY for cur (prev, words, cword from _ddplaunch).
_ddplaunch_answer() {
    # after the program (a script, a program or JOB.ini --) every word is the program's: file names
    local i w seen_target=0
    for ((i = 1; i < cword; i++)); do
        w=${words[i]}
        if [[ $w == -* ]]; then
            [[ $w != *=* && " ${_ddplaunch_argflags[*]} -r -t " == *" $w "* ]] && ((i++))
            continue
        fi
        ((i == 1)) && [[ " $_ddplaunch_commands " == *" $w "* ]] && continue
        [[ $w == *.ini ]] && continue
        seen_target=1
        break
    done
    if ((seen_target)); then
        compopt -o default 2>/dev/null
        return 0
    fi

    local val=
    case $prev in
    --set)
        val=$cur ;;
    --topology)
        compopt -o filenames 2>/dev/null
        COMPREPLY=($(compgen -f -X '!*.xml' -- "$cur") $(compgen -d -- "$cur"))
        return 0 ;;
    --config)
        compopt -o filenames 2>/dev/null
        COMPREPLY=($(compgen -f -X '!*.ini' -- "$cur") $(compgen -d -- "$cur"))
        return 0 ;;
    --log-dir)
        compopt -o filenames 2>/dev/null
        COMPREPLY=($(compgen -d -- "$cur"))
        return 0 ;;
    --nproc-per-node | --nproc_per_node)
        COMPREPLY=($(compgen -W "gpu cpu auto" -- "$cur"))
        return 0 ;;
    --master-port | --master_port)
        COMPREPLY=($(compgen -W "auto" -- "$cur"))
        return 0 ;;
    --numa-binding | --numa_binding)
        COMPREPLY=($(compgen -W "node socket exclusive core-complex none" -- "$cur"))
        return 0 ;;
    --console)
        COMPREPLY=($(compgen -W "auto raw lines" -- "$cur"))
        return 0 ;;
    --svg)
        compopt -o filenames 2>/dev/null
        COMPREPLY=($(compgen -f -X '!*.svg' -- "$cur") $(compgen -d -- "$cur"))
        return 0 ;;
    -r | -t | --redirects | --tee)
        COMPREPLY=($(compgen -W "0 1 2 3" -- "$cur"))
        return 0 ;;
    esac
    [[ $cur == --set=* ]] && val=${cur#--set=}
    if [[ $prev == --set || $cur == --set=* ]]; then
        local pre=${cur%"$val"}
        if [[ $val == *=* ]]; then
            local key=${val%%=*}
            COMPREPLY=($(compgen -P "$pre$key=" -W "${_ddplaunch_choices[$key]-}" -- "${val#*=}"))
        else
            compopt -o nospace 2>/dev/null
            COMPREPLY=($(compgen -P "$pre" -W "${_ddplaunch_keys[*]}" -- "$val"))
        fi
        return 0
    fi
    if [[ " ${_ddplaunch_argflags[*]} " == *" $prev "* ]]; then
        return 0 # a value nobody can guess
    fi
    local cmd=
    ((cword > 1)) && [[ " $_ddplaunch_commands " == *" ${words[1]} "* ]] && cmd=${words[1]}
    if [[ $cur == -* ]]; then
        case $cmd in
        topo | report | ps) COMPREPLY=($(compgen -W "$(_ddplaunch_cmd_flags "$bin" "$cmd")" -- "$cur")) ;;
        *) COMPREPLY=($(compgen -W "${_ddplaunch_flags[*]}" -- "$cur")) ;;
        esac
        return 0
    fi
    compopt -o filenames 2>/dev/null
    case $cmd in
    report) COMPREPLY=($(compgen -d -- "$cur")) ;; # a LOG_DIR or RUN_DIR
    ps | topo) ;;                                 # no argument but options
    *) COMPREPLY=($(compgen -f -- "$cur")) ;;
    esac
    ((cword == 1)) && COMPREPLY+=($(compgen -W "$_ddplaunch_commands" -- "$cur"))
    return 0
}
complete -F _ddplaunch ddplaunch

# lib_etcd.sh: a three-member etcd cluster on loopback for the etcd-v3 rendezvous tests (115-118), started by
# the test itself (Debian's etcd-server). Source after lib.sh. etcd_cluster starts it and sets ETCD_EPS
# ("127.0.0.1:P0,127.0.0.1:P1,127.0.0.1:P2"); etcd_kill I and etcd_start I stop and restart member I; every
# member is killed at exit by etcd_stop_all (the caller's EXIT trap calls it).
command -v etcd >/dev/null && command -v etcdctl >/dev/null || skip "etcd-server and etcd-client are not installed"
ETCD_PID=()
etcd_start() {
    local i=$1
    etcd --name "e$i" --data-dir "$TMP/etcd$i" --listen-client-urls "http://127.0.0.1:${ETCD_PORTS[$i]}" \
        --advertise-client-urls "http://127.0.0.1:${ETCD_PORTS[$i]}" \
        --listen-peer-urls "http://127.0.0.1:${ETCD_PORTS[$((i + 3))]}" \
        --initial-advertise-peer-urls "http://127.0.0.1:${ETCD_PORTS[$((i + 3))]}" \
        --initial-cluster "$ETCD_INITIAL" --initial-cluster-state new --heartbeat-interval 50 \
        --election-timeout 500 >>"$TMP/etcd$i.log" 2>&1 &
    ETCD_PID[$i]=$!
    disown "$!" # no "Killed" line from the shell when a test kills it
}
etcd_kill() {
    kill -KILL "${ETCD_PID[$1]}" 2>/dev/null
    for _ in $(seq 100); do kill -0 "${ETCD_PID[$1]}" 2>/dev/null || break; sleep 0.05; done
    ETCD_PID[$1]=
}
etcd_stop_all() { for p in "${ETCD_PID[@]}"; do [ -n "$p" ] && kill -KILL "$p" 2>/dev/null; done; }
etcdctl3() { ETCDCTL_API=3 etcdctl --endpoints "$ETCD_EPS" "$@"; }
etcd_cluster() {
    # The ports are picked, closed and then bound by etcd: a neighbour may take one in between. etcd then exits
    # with "address already in use", and the cluster is started again on new ports (up to 5 times).
    local try i
    for try in 1 2 3 4 5; do
        read -r -a ETCD_PORTS < <($PY -c 'import socket
s = [socket.socket() for _ in range(6)]
for x in s: x.bind(("127.0.0.1", 0))
print(" ".join(str(x.getsockname()[1]) for x in s))  # port retried')
        ETCD_INITIAL="e0=http://127.0.0.1:${ETCD_PORTS[3]},e1=http://127.0.0.1:${ETCD_PORTS[4]}"
        ETCD_INITIAL+=",e2=http://127.0.0.1:${ETCD_PORTS[5]}"
        ETCD_EPS="127.0.0.1:${ETCD_PORTS[0]},127.0.0.1:${ETCD_PORTS[1]},127.0.0.1:${ETCD_PORTS[2]}"
        for i in 0 1 2; do etcd_start $i; done
        for _ in $(seq 200); do
            etcdctl3 endpoint health >/dev/null 2>&1 && return 0
            grep -qs "address already in use" "$TMP"/etcd[012].log && break
            sleep 0.1
        done
        grep -qs "address already in use" "$TMP"/etcd[012].log || break
        echo "etcd: a port was taken before etcd bound it (try $try); again on new ports"
        for i in 0 1 2; do etcd_kill $i; done
        rm -rf "$TMP"/etcd[012] "$TMP"/etcd[012].log
    done
    cat "$TMP"/etcd*.log | tail -20
    fail "the etcd cluster did not become healthy"
}

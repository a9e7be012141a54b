#!/usr/bin/env bash
# etcd-v3 over TLS with client certificates (issue 55): torchrun's rdzv_conf keys protocol=https, cacert, cert
# and key reach libcurl. One etcd member that serves https and asks for a client certificate signed by a CA made
# here; two agents with the keys meet and run; without a client certificate the agent cannot join and says why
# in one line (exit 1 at the join timeout). On today's main the etcd backend never talks to etcd.
. "$DDP_SRCDIR/tests/integration/lib.sh"
command -v etcd >/dev/null || skip "etcd-server is not installed"
command -v openssl >/dev/null || skip "openssl is not installed"
all=()
trap 'kill -KILL "${all[@]}" 2>/dev/null; rm -rf "$TMP"' EXIT
cd "$TMP" || fail "no $TMP"
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 -subj /CN=test-ca 2>/dev/null ||
    fail "openssl: no CA"
for who in server client; do
    openssl req -newkey rsa:2048 -nodes -keyout $who.key -out $who.csr -subj /CN=$who 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1\n' >$who.ext
    openssl x509 -req -in $who.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out $who.pem -days 1 \
        -extfile $who.ext 2>/dev/null || fail "openssl: no $who certificate"
done
# The ports are picked, closed and then bound by etcd: when a neighbour took one in between, etcd exits with
# "address already in use" and starts again on new ports (up to 5 times).
healthy=0
for try in 1 2 3 4 5; do
    read -r cport pport < <($PY -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(" ".join(str(x.getsockname()[1]) for x in s))  # port retried')
    rm -rf "$TMP/etcd"
    etcd --data-dir "$TMP/etcd" --listen-client-urls "https://127.0.0.1:$cport" \
        --advertise-client-urls "https://127.0.0.1:$cport" --listen-peer-urls "http://127.0.0.1:$pport" \
        --initial-advertise-peer-urls "http://127.0.0.1:$pport" --initial-cluster "default=http://127.0.0.1:$pport" \
        --cert-file server.pem --key-file server.key --client-cert-auth --trusted-ca-file ca.pem >etcd.log 2>&1 &
    all+=($!)
    for _ in $(seq 100); do
        ETCDCTL_API=3 etcdctl --endpoints "https://127.0.0.1:$cport" --cacert ca.pem --cert client.pem \
            --key client.key endpoint health >/dev/null 2>&1 && { healthy=1; break; }
        grep -qs "address already in use" etcd.log && break
        sleep 0.1
    done
    [ $healthy = 1 ] && break
    grep -qs "address already in use" etcd.log || break
    kill -KILL "${all[-1]}" 2>/dev/null
done
[ $healthy = 1 ] || { tail -20 etcd.log; fail "etcd over TLS did not become healthy"; }
tls="protocol=https,cacert=$TMP/ca.pem,cert=$TMP/client.pem,key=$TMP/client.key"
pids=()
for i in 0 1; do
    "$DDP" --nnodes 2 --nproc-per-node 1 --rdzv-backend etcd-v3 --rdzv-endpoint "127.0.0.1:$cport" --rdzv-id tls \
        --rdzv-conf "$tls" --max-restarts 0 --no-python /bin/sh -c 'echo "rank $RANK of $WORLD_SIZE"' \
        >"a$i.out" 2>"a$i.err" &
    pids+=($!) all+=($!)
done
for i in 0 1; do wait "${pids[$i]}" || { cat "a$i.err"; fail "agent $i exited $? over TLS"; }; done
expect_eq "ranks" "$(cat a*.out | sort | tr '\n' ' ')" "rank 0 of 2 rank 1 of 2 "

# Without the client certificate: refused by etcd, said in one line, exit 1 at the join timeout.
"$DDP" --nnodes 2 --nproc-per-node 1 --rdzv-backend etcd-v3 --rdzv-endpoint "127.0.0.1:$cport" --rdzv-id tls2 \
    --rdzv-conf "protocol=https,cacert=$TMP/ca.pem,join_timeout=3" --no-python /bin/true >b.out 2>b.err
expect_eq "status without a client certificate" "$?" 1
expect_eq "lines about etcd's refusal" "$(grep -c 'etcd member 127.0.0.1:[0-9]*: ' b.err)" 2
expect_grep "^ddplaunch: warning: etcd: etcd member 127.0.0.1:$cport: .*; trying again for up to 3s$" b.err
echo ok

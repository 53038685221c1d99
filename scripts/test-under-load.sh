#!/usr/bin/env bash
# Run the test suite on a busy machine, as CI sees it: `npm test` twice in a
# row while one core is kept busy (a spinning node process) and a 3-node
# quotad cluster under load restarts its nodes in a loop beside it
# (scripts/load-cluster.mjs, run from a copy of the build, since `npm test`
# deletes and rebuilds dist/). Fails if either run fails. Every process it
# starts is stopped on exit, however it exits.
#
#   scripts/test-under-load.sh [RUNS]      # RUNS defaults to 2
#
# Logs: the test runs' output goes to stdout; the background cluster's
# (restarts, node logs) stays in the printed work directory.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
RUNS=${1:-2}

WORK=$(mktemp -d /tmp/qd-load.XXXXXX)
SPIN_PID=
CLUSTER_PID=

cleanup () {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$CLUSTER_PID" ] && kill -0 "$CLUSTER_PID" 2>/dev/null; then
    # the cluster script stops its nodes on SIGTERM; whatever is left of its group after 40 s is killed
    kill -TERM "$CLUSTER_PID" 2>/dev/null
    for _ in $(seq 1 400); do kill -0 "$CLUSTER_PID" 2>/dev/null || break; sleep 0.1; done
  fi
  [ -n "$CLUSTER_PID" ] && kill -KILL -- "-$CLUSTER_PID" 2>/dev/null
  [ -n "$SPIN_PID" ] && kill -KILL "$SPIN_PID" 2>/dev/null
  wait 2>/dev/null
  echo "under-load: background stopped (logs in $WORK)"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "under-load: building a copy of the CLI for the background cluster"
npm run build >/dev/null || { echo "under-load: build failed"; exit 1; }
# the build reads files beside package.json (the JSON schema, ...): copy the top-level files too
mkdir -p "$WORK/build"
cp -r dist "$WORK/build/dist"
find . -maxdepth 1 -type f -exec cp {} "$WORK/build/" \;
ln -s "$ROOT/node_modules" "$WORK/build/node_modules"

# (a) one core kept busy
node -e 'for (;;) {}' &
SPIN_PID=$!

# (b) a 3-node cluster under load, restarting nodes in a loop; its own process group (setsid), so
# that cleanup can end it and every node it started
mkdir -p "$WORK/cluster"
setsid node scripts/load-cluster.mjs "$WORK/build/dist" "$WORK/cluster" > "$WORK/cluster.log" 2>&1 &
CLUSTER_PID=$!
for _ in $(seq 1 600); do
  grep -q '3 nodes up' "$WORK/cluster.log" 2>/dev/null && break
  kill -0 "$CLUSTER_PID" 2>/dev/null || { echo "under-load: the background cluster did not start:"; cat "$WORK/cluster.log"; exit 1; }
  sleep 0.1
done
grep -q '3 nodes up' "$WORK/cluster.log" || { echo "under-load: the background cluster did not start in 60 s"; exit 1; }
echo "under-load: busy core (pid $SPIN_PID), cluster (pid $CLUSTER_PID) in $WORK/cluster"

# (c) the suite, RUNS times in a row
failed=0
for i in $(seq 1 "$RUNS"); do
  echo "under-load: npm test, run $i of $RUNS (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
  start=$(date +%s)
  npm test
  rc=$?
  took=$(( $(date +%s) - start ))
  restarts=$(grep -c 'restart [0-9]*:' "$WORK/cluster.log")
  if [ "$rc" -eq 0 ]; then result=passed; else result="FAILED (exit $rc)"; failed=1; fi
  echo "under-load: run $i $result in ${took}s; background restarts so far: $restarts"
  kill -0 "$CLUSTER_PID" 2>/dev/null || { echo "under-load: the background cluster died:"; tail -20 "$WORK/cluster.log"; failed=1; }
done
exit "$failed"

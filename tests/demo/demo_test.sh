#!/usr/bin/env bash
# scripts/demo as a user runs it (SPEC 7): it must exit 0 and tell the story it promises: the
# entries delivered, the fail-once entry retried, the rejected and the always-failing entries
# dead-lettered with their reasons, metrics, status, a dry-run replay, and a clean SIGTERM exit.
#   tests/demo/demo_test.sh [REPO_ROOT]
set -uo pipefail
root="${1:-$(cd "$(dirname "$0")/../.." && pwd)}"
out=$(mktemp)
trap 'rm -f "$out"' EXIT

timeout 300 "$root/scripts/demo" >"$out" 2>&1
code=$?
plain=$(sed 's/\x1b\[[0-9;]*m//g' "$out")
failed=0
fail() { echo "demo_test: $*" >&2; failed=1; }

[ "$code" -eq 0 ] || fail "scripts/demo exited with $code"
expect() {  # expect DESCRIPTION EXTENDED-REGEX: one line of the output matches
  grep -Eq -- "$2" <<<"$plain" || fail "missing: $1 (/$2/)"
}
expect "ready before entries are written" '^GET /readyz -> ready$'
for order in 1001 1002 1006 1007; do
  expect "order $order delivered once" "^processed +orders/[0-9]+-[0-9]+ \(attempt 1\): .*\"order\": \"$order\""
done
expect "the fail-once entry retried and then processed" '^processed +orders/[0-9-]+ \(attempt 2\): .*"order": "1003"'
expect "the binary field arrives base64" '"blob": "<binary, base64 //4AAQ==>"'
expect "the rejected entry dead-lettered as rejected" '^[0-9-]+ +[0-9-]+ +rejected +422 +1 '
expect "the failing entry dead-lettered after 3 attempts" '^[0-9-]+ +[0-9-]+ +max_attempts +500 +3 '
expect "acknowledged counter: every entry" '^streamcar_acked_total\{subscription="orders/billing"\} 7$'
expect "status: nothing pending" '^  pending: +0$'
expect "status: two dead letters" 'dead letters: 2 in orders:dlq'
expect "a dry-run replay changes nothing" '2 dead letters would be replayed \(dry run: nothing changed\)'
expect "a clean exit after SIGTERM" '^streamcar exited with code 0$'
expect "the last log line: shutdown complete, nothing left" '"msg":"shutdown complete","left_pending":0'
expect "the closing line" '^Done\. '

if [ "$failed" -ne 0 ]; then
  echo "---- scripts/demo output ----" >&2
  cat "$out" >&2
  exit 1
fi
echo "demo_test: scripts/demo exited 0 and printed what it promises"

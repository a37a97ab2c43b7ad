#!/usr/bin/env node
// A streamcar handler in Node.js with no dependencies.
//
// streamcar POSTs each stream entry here as JSON. Answer 2xx and the entry is acknowledged; 5xx
// and it is retried with backoff; 422 and it goes to the dead-letter stream at once. Delivery is
// at-least-once, so the handler deduplicates on the Idempotency-Key header ("<stream>/<id>").
//
// Sharded subscriptions (SPEC 9) add Streamcar-Shard and Streamcar-Fence (and "shard", "fence" in
// the JSON body). A paused or partitioned sidecar that has lost its shard may still POST an entry
// with its old, lower fence, so the handler keeps per shard the highest fence it has applied and
// answers 409 to a lower one: not 2xx, so the stale sender never acknowledges an entry whose effect
// did not happen, and not a reject status, so it is not dead-lettered; the entry stays pending for
// the shard's current owner. Plain requests (no such headers) are not affected.
//
// Signatures (SPEC 11): with STREAMCAR_HMAC_SECRET set (the sidecar's handler.auth.hmac_secret),
// every POST must carry Streamcar-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret,
// "<t>.<body>")>, computed here over the raw body bytes before anything parses them, compared in
// constant time, with t at most 5 minutes from this clock (a captured request cannot be replayed
// later). Anything else is answered 401: not 2xx and not a reject status, so a sidecar with the
// wrong secret retries instead of dead-lettering. Without the variable nothing is checked.
//
// The field "action" drives it: ok -> 200, fail-once -> 500 then 200, fail -> 500, reject -> 422.
// Usage: [STREAMCAR_HMAC_SECRET=...] node handler.js [PORT]   (default 8080; GET /healthz answers 200)
'use strict';
const crypto = require('crypto');
const http = require('http');

const port = Number(process.argv[2] || 8080);
const processed = new Set();  // a real handler keeps these with its results (a unique key)
// The highest fence applied per (shard's stream, group, shard): fences are counted per
// subscription. A real handler keeps it next to its data and updates it in the same transaction as
// the side effect (UPDATE ... SET fence = :fence WHERE shard = :shard AND fence <= :fence). Here the
// request is handled in one synchronous callback, so the comparison, the effect and the store
// cannot interleave with another request.
const highestFence = new Map();
const DECIMAL = /^[0-9]{1,15}$/;  // within Number's exact integers
const SECRET = process.env.STREAMCAR_HMAC_SECRET || '';
const TOLERANCE_SECONDS = 300;
const SIGNATURE = /^t=([0-9]{1,12}),v1=([0-9a-f]{64})$/;

// null when the Streamcar-Signature header signs `body` (a Buffer) with SECRET, else why not.
function signatureProblem(header, body) {
  const match = SIGNATURE.exec(header || '');
  if (!match) return 'missing or malformed Streamcar-Signature';
  const [, t, received] = match;
  if (Math.abs(Date.now() / 1000 - Number(t)) > TOLERANCE_SECONDS) {
    return `signature time ${t} is more than ${TOLERANCE_SECONDS} s from now`;
  }
  const expected = crypto.createHmac('sha256', SECRET).update(`${t}.`).update(body).digest();
  if (!crypto.timingSafeEqual(expected, Buffer.from(received, 'hex'))) {
    return 'signature does not match the body';
  }
  return null;
}

function answer(res, status, body) {
  const text = body === undefined ? '' : JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

// {shard, fence} of a sharded request, null for a plain one; throws when malformed. The headers
// come with every format; the JSON body's "shard" and "fence" are read when they are missing (for
// example behind a proxy that drops unknown headers).
function shardAndFence(headers, envelope) {
  const shard = headers['streamcar-shard'] ?? envelope.shard;
  const fence = headers['streamcar-fence'] ?? envelope.fence;
  if (shard === undefined && fence === undefined) return null;
  if (!DECIMAL.test(String(shard)) || !DECIMAL.test(String(fence))) {
    throw new Error(`shard ${JSON.stringify(shard)} and fence ${JSON.stringify(fence)} must both be non-negative integers`);
  }
  return { shard: Number(shard), fence: Number(fence) };
}

const server = http.createServer((req, res) => {
  if (req.method === 'GET') return answer(res, req.url === '/healthz' ? 200 : 404);
  const chunks = [];
  req.on('data', (chunk) => chunks.push(chunk));
  req.on('end', () => {
    const key = req.headers['idempotency-key'] || '';
    const body = Buffer.concat(chunks);
    if (SECRET) {
      const problem = signatureProblem(req.headers['streamcar-signature'], body);
      if (problem) {
        console.log(`unsigned   ${key}: 401, ${problem}`);
        return answer(res, 401, { error: problem });
      }
    }
    const attempts = Number(req.headers['streamcar-attempts'] || 1);
    const envelope = JSON.parse(body.toString('utf8'));
    const action = (envelope.payload || {}).action || 'ok';
    let sharded;
    try {
      sharded = shardAndFence(req.headers, envelope);
    } catch (error) {
      console.log(`bad fence  ${key}: 400, ${error.message}`);
      return answer(res, 400, { error: error.message });
    }
    let where = '';
    let fenceKey;
    if (sharded) {
      where = ` shard ${sharded.shard} fence ${sharded.fence}`;
      fenceKey = JSON.stringify([req.headers['streamcar-stream'] ?? envelope.stream,
        req.headers['streamcar-group'] ?? envelope.group, sharded.shard]);
      const applied = highestFence.get(fenceKey);
      if (applied !== undefined && sharded.fence < applied) {
        console.log(`stale      ${key}${where} < ${applied}: 409, a newer owner has applied this shard`);
        return answer(res, 409, { error: 'stale fence', shard: sharded.shard, fence: sharded.fence, applied });
      }
    }
    if (processed.has(key)) {
      console.log(`duplicate  ${key} (attempt ${attempts}): already processed, answering 200`);
      return answer(res, 200);
    }
    if (action === 'reject') {
      console.log(`reject     ${key}: 422, this entry can never succeed`);
      return answer(res, 422, { error: 'invalid order' });
    }
    if (action === 'fail' || (action === 'fail-once' && attempts === 1)) {
      console.log(`fail       ${key} (attempt ${attempts}): 500, please retry`);
      return answer(res, 500, { error: 'database unavailable' });
    }
    // The side effect and the fence store, together.
    processed.add(key);
    if (sharded) highestFence.set(fenceKey, sharded.fence);
    console.log(`processed  ${key} (attempt ${attempts})${where}: ${JSON.stringify(envelope.payload)}`);
    answer(res, 200);
  });
});
server.keepAliveTimeout = 65000;  // longer than streamcar keeps idle connections
server.listen(port, '127.0.0.1', () => console.log(`node handler listening on 127.0.0.1:${port}`));

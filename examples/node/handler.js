#!/usr/bin/env node
// A streamcar handler in Node.js with no dependencies.
//
// streamcar POSTs each stream entry here as JSON. Answer 2xx and the entry is acknowledged; 5xx
// and it is retried with backoff; 422 and it goes to the dead-letter stream at once. Delivery is
// at-least-once, so the handler deduplicates on the Idempotency-Key header ("<stream>/<id>").
//
// The field "action" drives it: ok -> 200, fail-once -> 500 then 200, fail -> 500, reject -> 422.
// Usage: node handler.js [PORT]   (default 8080; GET /healthz answers 200)
'use strict';
const http = require('http');

const port = Number(process.argv[2] || 8080);
const processed = new Set();  // a real handler keeps these with its results (a unique key)

function answer(res, status, body) {
  const text = body === undefined ? '' : JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

const server = http.createServer((req, res) => {
  if (req.method === 'GET') return answer(res, req.url === '/healthz' ? 200 : 404);
  const chunks = [];
  req.on('data', (chunk) => chunks.push(chunk));
  req.on('end', () => {
    const key = req.headers['idempotency-key'] || '';
    const attempts = Number(req.headers['streamcar-attempts'] || 1);
    const envelope = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    const action = (envelope.payload || {}).action || 'ok';
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
    processed.add(key);
    console.log(`processed  ${key} (attempt ${attempts}): ${JSON.stringify(envelope.payload)}`);
    answer(res, 200);
  });
});
server.keepAliveTimeout = 65000;  // longer than streamcar keeps idle connections
server.listen(port, '127.0.0.1', () => console.log(`node handler listening on 127.0.0.1:${port}`));

// The hand-written peer: what a team writes instead of a sidecar. ioredis, fetch, a pool of
// CONCURRENCY loops, XACK per entry. It drains the preloaded stream and exits.
// Usage: node worker.js REDIS_PORT STREAM GROUP HANDLER_URL CONCURRENCY
'use strict';
const Redis = require('ioredis');

const [port, stream, group, url, concurrencyText] = process.argv.slice(2);
const concurrency = Number(concurrencyText);
const redis = new Redis({ port: Number(port), host: '127.0.0.1', lazyConnect: false });

async function deliver(id, fields) {
  const payload = {};
  for (let i = 0; i < fields.length; i += 2) payload[fields[i]] = fields[i + 1];
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'Idempotency-Key': `${stream}/${id}` },
    body: JSON.stringify({ id, stream, group, attempts: 1, payload }),
  });
  await response.arrayBuffer();
  if (response.ok) await redis.xack(stream, group, id);
}

async function loop(name) {
  // Each loop reads one entry at a time and delivers it: the usual shape of such workers.
  for (;;) {
    const reply = await redis.xreadgroup('GROUP', group, name, 'COUNT', 1, 'STREAMS', stream, '>');
    if (!reply) return;
    const entries = reply[0][1];
    if (entries.length === 0) return;
    for (const [id, fields] of entries) await deliver(id, fields);
  }
}

(async () => {
  await Promise.all(Array.from({ length: concurrency }, (_, i) => loop(`node-${i}`)));
  await redis.quit();
})();

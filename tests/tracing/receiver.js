// An OTLP/HTTP trace receiver for tests/tracing/tracing_test.py. It decodes every
// ExportTraceServiceRequest with the OpenTelemetry project's own generated protobuf definitions
// (@opentelemetry/otlp-transformer's opentelemetry-proto root) and prints one JSON line per
// request: {"content_type", "spans": [...]} with ids in hex and attributes as a plain object.
//
//   node receiver.js PORT
const http = require("http");
const root = require("@opentelemetry/otlp-transformer/build/src/generated/root.js");

const v1 = root.opentelemetry.proto;
const Request = v1.collector.trace.v1.ExportTraceServiceRequest;
const Response = v1.collector.trace.v1.ExportTraceServiceResponse;

const hex = (bytes) => Buffer.from(bytes || []).toString("hex");

function value(any) {
  if (any.stringValue !== undefined && any.stringValue !== null && any.stringValue !== "") return any.stringValue;
  if (any.intValue !== undefined && any.intValue !== null) return Number(any.intValue);
  return any.stringValue;
}

function attributes(list) {
  const out = {};
  for (const kv of list || []) out[kv.key] = value(kv.value);
  return out;
}

http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const decoded = Request.decode(Buffer.concat(chunks));
    const spans = [];
    for (const rs of decoded.resourceSpans) {
      const resource = attributes(rs.resource && rs.resource.attributes);
      for (const ss of rs.scopeSpans) {
        for (const s of ss.spans) {
          spans.push({
            resource,
            scope: ss.scope ? ss.scope.name : "",
            trace_id: hex(s.traceId),
            span_id: hex(s.spanId),
            parent_span_id: hex(s.parentSpanId),
            name: s.name,
            kind: s.kind,
            start: String(s.startTimeUnixNano),
            end: String(s.endTimeUnixNano),
            attributes: attributes(s.attributes),
            links: (s.links || []).map((l) => ({ trace_id: hex(l.traceId), span_id: hex(l.spanId) })),
            status_code: s.status ? s.status.code : 0,
            status_message: s.status ? s.status.message : "",
          });
        }
      }
    }
    process.stdout.write(JSON.stringify({ path: req.url, content_type: req.headers["content-type"], spans }) + "\n");
    const body = Response.encode(Response.create({})).finish();
    res.writeHead(200, { "Content-Type": "application/x-protobuf", "Content-Length": body.length });
    res.end(Buffer.from(body));
  });
}).listen(Number(process.argv[2]), "127.0.0.1");

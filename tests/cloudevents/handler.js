// A CloudEvents handler built on the official JavaScript SDK (npm package "cloudevents"): every
// request (binary or structured mode) is turned into an event with HTTP.toEvent and validated.
// One JSON line per request on stdout says what the SDK made of it; interop_test.py reads them.
//   node handler.js PORT
"use strict";
const http = require("http");
const { HTTP } = require("cloudevents");

const port = Number(process.argv[2]);

// The HTTP binding percent-encodes attribute values in headers and the SDK hands them over as
// they came: the receiver decodes ce-type once. ce-source is a URI-reference whose last segment
// is the percent-encoded stream name: decoding that segment once gives the stream back.

http
  .createServer((req, res) => {
    const chunks = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const report = { id: req.headers["ce-id"], path: req.url };
      // Structured mode (cloudevents-structured, dapr) percent-encodes nothing: decoding is for
      // the binary mode's header values, and a literal '%' must not make the report fail.
      const decode = (text) => {
        try {
          return decodeURIComponent(text);
        } catch (error) {
          return null;
        }
      };
      try {
        const event = HTTP.toEvent({ headers: req.headers, body });
        event.validate(); // throws a ValidationError when the event is not valid CloudEvents 1.0
        const prefix = "/streams/";
        report.ok = true;
        report.type = event.type;
        report.source = event.source;
        report.id = event.id;
        report.decoded_type = decode(event.type);
        report.decoded_stream = event.source.startsWith(prefix)
          ? decode(event.source.slice(prefix.length))
          : null;
        report.datacontenttype = event.datacontenttype;
        if (event.data instanceof Uint8Array) {
          report.data_bytes = Buffer.from(event.data).toString("base64");
        } else if (event.data_base64 !== undefined) {
          report.data_bytes = event.data_base64;
        } else {
          report.data = typeof event.data === "string" ? event.data : JSON.stringify(event.data);
        }
        // Dapr's extension attributes (format dapr), as the SDK hands them over.
        for (const name of ["topic", "pubsubname", "traceparent", "traceid"]) {
          if (event[name] !== undefined) report[name] = event[name];
        }
      } catch (error) {
        report.ok = false;
        report.error = String(error && error.message ? error.message : error) +
          (error && error.errors ? " " + JSON.stringify(error.errors) : "");
      }
      process.stdout.write(JSON.stringify(report) + "\n");
      res.writeHead(200, { "Content-Type": "text/plain" });
      res.end("ok");
    });
  })
  .listen(port, "127.0.0.1", () => process.stdout.write(JSON.stringify({ listening: port }) + "\n"));

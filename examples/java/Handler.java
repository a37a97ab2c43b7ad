// A streamcar handler in Java with no dependencies (the JDK's own HTTP server).
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
// "<t>.<body>")>, computed here over the raw body bytes before anything decodes them, compared in
// constant time (MessageDigest.isEqual), with t at most 5 minutes from this clock (a captured
// request cannot be replayed later). Anything else is answered 401: not 2xx and not a reject
// status, so a sidecar with the wrong secret retries instead of dead-lettering. Without the
// variable nothing is checked.
//
// The field "action" drives it: ok -> 200, fail-once -> 500 then 200, fail -> 500, reject -> 422.
// Usage: [STREAMCAR_HMAC_SECRET=...] java Handler.java [PORT]   (JDK 11+; default 8080; GET /healthz answers 200)

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

public class Handler {
  // A real handler keeps these with its results (a unique key in its database).
  private static final Set<String> processed = ConcurrentHashMap.newKeySet();
  // The highest fence applied per (shard's stream, group, shard): fences are counted per
  // subscription. A real handler keeps it next to its data and updates it in the same transaction
  // as the side effect (UPDATE ... SET fence = :fence WHERE shard = :shard AND fence <= :fence);
  // here `effects` makes the comparison, the effect and the store one step.
  private static final Map<List<String>, Long> highestFence = new HashMap<>();
  private static final Object effects = new Object();
  // Enough JSON reading for this example: the "action" field of the payload, and the envelope's
  // "shard", "fence", "stream" and "group" (payload values are strings, so a bare number after
  // "shard": or "fence": can only be the envelope's).
  private static final Pattern ACTION = Pattern.compile("\"action\"\\s*:\\s*\"([a-z-]+)\"");
  private static final Pattern DECIMAL = Pattern.compile("[0-9]{1,18}");
  private static final String SECRET = System.getenv().getOrDefault("STREAMCAR_HMAC_SECRET", "");
  private static final long TOLERANCE_SECONDS = 300;
  private static final Pattern SIGNATURE = Pattern.compile("t=([0-9]{1,12}),v1=([0-9a-f]{64})");

  // A sharded request's shard and fence, and the key its highest fence is kept under.
  private static final class Fence {
    final List<String> key;
    final long shard;
    final long fence;

    Fence(List<String> key, long shard, long fence) {
      this.key = key;
      this.shard = shard;
      this.fence = fence;
    }
  }

  public static void main(String[] args) throws IOException {
    int port = args.length > 0 ? Integer.parseInt(args[0]) : 8080;
    HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 128);
    server.setExecutor(Executors.newFixedThreadPool(16));
    server.createContext("/", Handler::handle);
    server.start();
    System.out.println("java handler listening on 127.0.0.1:" + port);
  }

  private static void handle(HttpExchange exchange) throws IOException {
    if (exchange.getRequestMethod().equals("GET")) {
      answer(exchange, exchange.getRequestURI().getPath().equals("/healthz") ? 200 : 404, "");
      return;
    }
    byte[] raw = exchange.getRequestBody().readAllBytes();
    String key = header(exchange, "Idempotency-Key", "");
    if (!SECRET.isEmpty()) {
      String problem = signatureProblem(header(exchange, "Streamcar-Signature", ""), raw);
      if (problem != null) {
        log("unsigned   " + key + ": 401, " + problem);
        answer(exchange, 401, "{\"error\":\"" + problem + "\"}");
        return;
      }
    }
    String body = new String(raw, StandardCharsets.UTF_8);
    int attempts = Integer.parseInt(header(exchange, "Streamcar-Attempts", "1"));
    Matcher m = ACTION.matcher(body);
    String action = m.find() ? m.group(1) : "ok";
    Fence sharded;
    try {
      sharded = shardAndFence(exchange, body);
    } catch (IllegalArgumentException e) {
      log("bad fence  " + key + ": 400, " + e.getMessage());
      answer(exchange, 400, "{\"error\":\"malformed Streamcar-Shard or Streamcar-Fence\"}");
      return;
    }
    String where = sharded == null ? "" : " shard " + sharded.shard + " fence " + sharded.fence;
    int status;
    String reply = "";
    synchronized (effects) {
      Long applied = sharded == null ? null : highestFence.get(sharded.key);
      if (applied != null && sharded.fence < applied) {
        log("stale      " + key + where + " < " + applied
            + ": 409, a newer owner has applied this shard");
        status = 409;
        reply = "{\"error\":\"stale fence\",\"shard\":" + sharded.shard + ",\"fence\":"
            + sharded.fence + ",\"applied\":" + applied + "}";
      } else if (processed.contains(key)) {
        log("duplicate  " + key + " (attempt " + attempts + "): already processed, answering 200");
        status = 200;
      } else if (action.equals("reject")) {
        log("reject     " + key + ": 422, this entry can never succeed");
        status = 422;
        reply = "{\"error\":\"invalid order\"}";
      } else if (action.equals("fail") || (action.equals("fail-once") && attempts == 1)) {
        log("fail       " + key + " (attempt " + attempts + "): 500, please retry");
        status = 500;
        reply = "{\"error\":\"database unavailable\"}";
      } else {
        // The side effect and the fence store, together.
        processed.add(key);
        if (sharded != null) highestFence.put(sharded.key, sharded.fence);
        log("processed  " + key + " (attempt " + attempts + ")" + where + ": " + body);
        status = 200;
      }
    }
    answer(exchange, status, reply);
  }

  // null when `header` signs `body` with SECRET, else why not.
  private static String signatureProblem(String header, byte[] body) {
    Matcher m = SIGNATURE.matcher(header);
    if (!m.matches()) return "missing or malformed Streamcar-Signature";
    long t = Long.parseLong(m.group(1));
    if (Math.abs(System.currentTimeMillis() / 1000 - t) > TOLERANCE_SECONDS) {
      return "signature time " + t + " is more than " + TOLERANCE_SECONDS + " s from now";
    }
    try {
      Mac mac = Mac.getInstance("HmacSHA256");
      mac.init(new SecretKeySpec(SECRET.getBytes(StandardCharsets.UTF_8), "HmacSHA256"));
      mac.update((m.group(1) + ".").getBytes(StandardCharsets.US_ASCII));
      byte[] expected = mac.doFinal(body);
      byte[] received = new byte[expected.length];
      for (int i = 0; i < received.length; i++) {
        received[i] = (byte) Integer.parseInt(m.group(2).substring(2 * i, 2 * i + 2), 16);
      }
      return MessageDigest.isEqual(expected, received) ? null : "signature does not match the body";
    } catch (GeneralSecurityException e) {
      return "cannot compute HMAC-SHA256: " + e.getMessage();
    }
  }

  // The headers come with every format; the JSON body's "shard" and "fence" are read when they
  // are missing (for example behind a proxy that drops unknown headers).
  private static Fence shardAndFence(HttpExchange exchange, String body) {
    String shard = header(exchange, "Streamcar-Shard", envelopeNumber(body, "shard"));
    String fence = header(exchange, "Streamcar-Fence", envelopeNumber(body, "fence"));
    if (shard == null && fence == null) return null;
    if (shard == null || fence == null || !DECIMAL.matcher(shard).matches()
        || !DECIMAL.matcher(fence).matches()) {
      throw new IllegalArgumentException(
          "shard " + shard + " and fence " + fence + " must both be non-negative integers");
    }
    String stream = header(exchange, "Streamcar-Stream", envelopeString(body, "stream"));
    String group = header(exchange, "Streamcar-Group", envelopeString(body, "group"));
    return new Fence(List.of(String.valueOf(stream), String.valueOf(group), shard),
        Long.parseLong(shard), Long.parseLong(fence));
  }

  // The first "name":123 of the body (the envelope's: payload values are strings), or null.
  private static String envelopeNumber(String body, String name) {
    Matcher m = Pattern.compile("\"" + name + "\"\\s*:\\s*([0-9]+)").matcher(body);
    return m.find() ? m.group(1) : null;
  }

  // The first "name":"text" of the body (the envelope's "stream" and "group" come before the
  // payload), or null.
  private static String envelopeString(String body, String name) {
    Matcher m = Pattern.compile("\"" + name + "\"\\s*:\\s*\"([^\"\\\\]*)\"").matcher(body);
    return m.find() ? m.group(1) : null;
  }

  private static String header(HttpExchange exchange, String name, String fallback) {
    String value = exchange.getRequestHeaders().getFirst(name);
    return value != null ? value : fallback;
  }

  private static synchronized void log(String line) {
    System.out.println(line);
    System.out.flush();
  }

  private static void answer(HttpExchange exchange, int status, String body) throws IOException {
    byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
    exchange.getResponseHeaders().set("Content-Type", "application/json");
    exchange.sendResponseHeaders(status, bytes.length == 0 ? -1 : bytes.length);
    if (bytes.length > 0) exchange.getResponseBody().write(bytes);
    exchange.close();
  }
}

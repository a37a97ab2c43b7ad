// A streamcar handler in Java with no dependencies (the JDK's own HTTP server).
//
// streamcar POSTs each stream entry here as JSON. Answer 2xx and the entry is acknowledged; 5xx
// and it is retried with backoff; 422 and it goes to the dead-letter stream at once. Delivery is
// at-least-once, so the handler deduplicates on the Idempotency-Key header ("<stream>/<id>").
//
// The field "action" drives it: ok -> 200, fail-once -> 500 then 200, fail -> 500, reject -> 422.
// Usage: java Handler.java [PORT]   (JDK 11+; default 8080; GET /healthz answers 200)

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

public class Handler {
  // A real handler keeps these with its results (a unique key in its database).
  private static final Set<String> processed = ConcurrentHashMap.newKeySet();
  // Enough JSON reading for this example: the "action" field of the payload.
  private static final Pattern ACTION = Pattern.compile("\"action\":\"([a-z-]+)\"");

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
    String body = new String(exchange.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
    String key = header(exchange, "Idempotency-Key", "");
    int attempts = Integer.parseInt(header(exchange, "Streamcar-Attempts", "1"));
    Matcher m = ACTION.matcher(body);
    String action = m.find() ? m.group(1) : "ok";
    if (processed.contains(key)) {
      log("duplicate  " + key + " (attempt " + attempts + "): already processed, answering 200");
      answer(exchange, 200, "");
    } else if (action.equals("reject")) {
      log("reject     " + key + ": 422, this entry can never succeed");
      answer(exchange, 422, "{\"error\":\"invalid order\"}");
    } else if (action.equals("fail") || (action.equals("fail-once") && attempts == 1)) {
      log("fail       " + key + " (attempt " + attempts + "): 500, please retry");
      answer(exchange, 500, "{\"error\":\"database unavailable\"}");
    } else {
      processed.add(key);
      log("processed  " + key + " (attempt " + attempts + "): " + body);
      answer(exchange, 200, "");
    }
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

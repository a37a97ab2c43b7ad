#!/usr/bin/env python3
"""A pub/sub subscriber written the way Dapr's documentation shows one (Python, Flask): it
declares its subscriptions programmatically on GET /dapr/subscribe and answers each CloudEvent
with Dapr's {"status": "SUCCESS" | "RETRY" | "DROP"}. Nothing in it knows about streamcar; the
only test hook is one JSON line per delivery on stdout, which dapr_app_test.py reads.

    subscriber.py PORT
"""
import json
import sys
import threading

from flask import Flask, jsonify, request

app = Flask(__name__)
seen = {}
lock = threading.Lock()  # Flask serves requests on threads: one whole line per report


@app.route("/dapr/subscribe", methods=["GET"])
def subscribe():
    # Dapr's v1 shape (route, deadLetterTopic) and its v2 shape (routes.default), a topic routed
    # to a path this app does not serve (Dapr drops what gets a 404), and one CEL rule.
    return jsonify([
        {"pubsubname": "pubsub", "topic": "orders", "route": "orders",
         "deadLetterTopic": "poisonMessages"},
        {"pubsubname": "pubsub", "topic": "checkout", "routes": {"default": "/checkout"}},
        {"pubsubname": "pubsub", "topic": "legacy", "route": "/retired"},
        {"pubsubname": "pubsub", "topic": "filtered",
         "routes": {"rules": [{"match": 'event.type == "widget"', "path": "/widgets"}],
                    "default": "/filtered"}},
    ])


def report(route, event):
    with lock:
        sys.stdout.write(json.dumps({"route": route, "event": event}) + "\n")
        sys.stdout.flush()


@app.route("/orders", methods=["POST"])
def orders():
    event = request.json
    report("/orders", event)
    action = event["data"].get("action", "ok")
    with lock:
        seen[event["id"]] = seen.get(event["id"], 0) + 1
        first = seen[event["id"]] == 1
    if action == "retry" or (action == "retry-once" and first):
        return jsonify({"status": "RETRY"})
    if action == "drop":
        return jsonify({"status": "DROP"})
    if action == "empty":
        return "", 200
    return jsonify({"status": "SUCCESS"})


@app.route("/checkout", methods=["POST"])
def checkout():
    report("/checkout", request.json)
    return json.dumps({"success": True}), 200, {"ContentType": "application/json"}


if __name__ == "__main__":
    app.run(host="127.0.0.1", port=int(sys.argv[1]))


-- KEYS[1] stream, KEYS[2] dead-letter stream; ARGV[1] group, ARGV[2] consumer, ARGV[3] id,
-- ARGV[4] ack mode (ack | ackdel | ackxdel), ARGV[5] dead-letter max length (0: none),
-- ARGV[6..] the fields to write. A failing XADD stops the script before the acknowledgement.
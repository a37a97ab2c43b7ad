
-- KEYS[1] stream; ARGV[1] group, ARGV[2] consumer, ARGV[3] id,
-- ARGV[4] ack mode (ack | ackdel | ackxdel), as kDeadLetterScript acknowledges.
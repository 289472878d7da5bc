DROP TABLE payment_requests;
DROP TABLE outbox;

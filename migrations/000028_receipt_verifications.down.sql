DROP TABLE IF EXISTS receipt_verifications;

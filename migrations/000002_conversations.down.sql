DROP TABLE records;
DROP TABLE messages;
DROP TABLE proposals;
DROP TABLE conversations;

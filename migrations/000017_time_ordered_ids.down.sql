ALTER TABLE receipts ALTER COLUMN id SET DEFAULT gen_random_uuid();
ALTER TABLE approvals ALTER COLUMN id SET DEFAULT gen_random_uuid();
ALTER TABLE proposals ALTER COLUMN id SET DEFAULT gen_random_uuid();
DROP FUNCTION gatehouse_uuid_v7();

DROP TABLE policy_file_settings;
DROP TABLE policy_instances;

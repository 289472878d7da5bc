DROP TABLE upstream_tools;

DROP TRIGGER upstream_tools_announce ON upstream_tools;
DROP FUNCTION upstream_tools_announce();

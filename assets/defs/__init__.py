"""The example's definitions, one folder each, as ``dg`` projects lay them out: the tables declared
in Python (``tables``) and in YAML (``dws_user_daily``), their maintenance, and the resources."""

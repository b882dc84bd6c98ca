"""What the example's ``defs.yaml`` files use: ``{{ first_day }}``, its first daily partition."""

import dagster as dg

from assets.events import START


@dg.template_var
def first_day() -> str:
    return START

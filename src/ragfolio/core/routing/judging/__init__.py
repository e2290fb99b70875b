"""How routers are judged and chosen: best-of-l on test questions, the same-budget check, headroom, the served router's choice, feature ablations."""

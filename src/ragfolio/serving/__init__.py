"""The HTTP service: the trained portfolio and router behind BentoML (``bentoml serve``).

``service`` holds the BentoML class (imports bentoml); ``engine`` does the work with
:mod:`ragfolio.core`; ``schemas`` the request and response bodies; ``config`` the settings.
"""

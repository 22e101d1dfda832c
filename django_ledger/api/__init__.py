"""The REST API: producers and workers in any language, over HTTP.

Mount it with ``path("api/", include("django_ledger.api.urls"))``. It needs
``rest_framework``, ``rest_framework.authtoken`` and ``drf_spectacular`` in
``INSTALLED_APPS``; every view sets its own authentication, permissions, throttles,
renderer and exception handler, so the project's ``REST_FRAMEWORK`` defaults do not
change its contract.
"""

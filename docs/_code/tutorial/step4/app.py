"""Tutorial, step 4: the Flask app, reaching the worker's actor system per request."""

if __name__ == "__main__":  # run by hand: patch first (gunicorn's gevent worker does it)
    from gevent import monkey

    monkey.patch_all()

from typing import Any

from actors import GetRate
from flask import Flask, request

from gactors import AskTimeoutError
from gactors.contrib.wsgi import GactorsMiddleware, get_system

# [start app]
app = Flask(__name__)
app.wsgi_app = GactorsMiddleware(app.wsgi_app)  # type: ignore[method-assign]


@app.get("/rate/<currency>")
def rate(currency: str) -> Any:
    rates = get_system(request.environ).lookup("/user/rates")
    if rates is None:
        return {"error": "rates are unavailable, try again"}, 503
    try:
        return {"currency": currency, "rate": rates.ask(GetRate(currency), timeout=2.0)}
    except LookupError:
        return {"error": f"unknown currency {currency}"}, 404
    except (ConnectionError, AskTimeoutError):
        return {"error": "rates are unavailable, try again"}, 503


# [end app]

if __name__ == "__main__":
    # Without gunicorn: start a worker system by hand, as post_worker_init would.
    from actors import make_system

    from gactors.contrib import set_worker_system

    system = make_system()
    set_worker_system(system)
    try:
        client = app.test_client()
        print(client.get("/rate/GBP").status_code, client.get("/rate/GBP").json)
    finally:
        system.terminate()
        print("terminated:", system.await_termination(5.0))

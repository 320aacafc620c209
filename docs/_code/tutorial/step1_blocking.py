"""Tutorial, step 1: a Flask view that calls a slow API on every request."""

from gevent import monkey

monkey.patch_all()  # gunicorn's gevent worker does this for you

from flask import Flask  # noqa: E402
from upstream import RatesAPI  # noqa: E402


# [start app]
def create_app(api: RatesAPI) -> Flask:
    app = Flask(__name__)

    @app.get("/rate/<currency>")
    def rate(currency: str) -> dict[str, object]:
        return {"currency": currency, "rate": api.fetch(currency)}

    return app


# [end app]

if __name__ == "__main__":
    # [start check]
    api = RatesAPI()
    client = create_app(api).test_client()
    for _ in range(3):
        print(client.get("/rate/EUR").json)
    print("upstream calls:", api.calls)  # one per request
    # [end check]

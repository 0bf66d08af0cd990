# approvalbot: the service (API, web page, chat adapters, clock) in one container.
#   docker build -t approvalbot .
#   docker run -p 8787:8787 -v approvalbot-data:/data approvalbot
# The first start prints the tokens and a sign-in link (docker logs). See docs/deployment.md.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN useradd --system --uid 10001 --home-dir /data --shell /usr/sbin/nologin approvalbot \
    && install -d -o approvalbot -g approvalbot /data /config

WORKDIR /src
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY adapters ./adapters
COPY store ./store
RUN pip install . && rm -rf /src
COPY config.example.toml /usr/share/approvalbot/config.example.toml

# Listen on every interface inside the container; keep SQLite in the /data volume. Use
# PostgreSQL for several instances: -e APPROVALBOT_STORE__URL=postgresql+asyncpg://…
# A config file: -v ./approvalbot.toml:/config/approvalbot.toml:ro
#                -e APPROVALBOT_CONFIG=/config/approvalbot.toml
ENV APPROVALBOT_SERVER__HOST=0.0.0.0 \
    APPROVALBOT_SERVER__PORT=8787 \
    APPROVALBOT_STORE__URL=sqlite+aiosqlite:////data/approvalbot.db

USER approvalbot
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8787
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, sys, urllib.request; port = os.environ.get('APPROVALBOT_SERVER__PORT', '8787'); sys.exit(0 if urllib.request.urlopen(f'http://127.0.0.1:{port}/readyz', timeout=4).status == 200 else 1)"]

ENTRYPOINT ["approvalbot"]
CMD ["serve"]

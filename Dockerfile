# mdcron without cron: `scheduler.py daemon` starts the tick every minute (see README).
FROM python:3.11-slim
WORKDIR /app
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt
COPY scheduler.py ./
COPY mdcron ./mdcron
RUN useradd --create-home --uid 10001 mdcron && mkdir /data && chown mdcron /data
# the Claude prompt templates live in the home: a new named volume starts with them
COPY --chown=mdcron prompts /data/prompts
# the home (tasks/, scheduler.yaml, state/, logs/) is a volume; the code stays in /app
ENV MDCRON_HOME=/data
VOLUME /data
USER mdcron
# the daemon handles SIGTERM itself: running tasks get stop_grace (docker stop -t 45)
STOPSIGNAL SIGTERM
CMD ["python", "scheduler.py", "daemon"]

# The cvmjob CLI in a container: `docker run --rm -e TENCENTCLOUD_SECRET_ID -e TENCENTCLOUD_SECRET_KEY
#   -e TENCENTCLOUD_APPID -v "$PWD:/work" -v cvmjob-home:/home/cvmjob/.cvmjob cvmjob run job.yaml`.
# The controller needs neither torch nor a GPU; training happens on the instances. Without credentials it runs the
# embedded local emulator, whose instances would then run inside this container (build `.[emulator,train]` for that;
# `.[postgres]` for a team's PostgreSQL store, `.[sweep,report]` for sweeps: README, "What to install").
FROM python:3.11-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY orchestrator ./orchestrator
COPY crc64ecma ./crc64ecma
RUN pip install --no-cache-dir --upgrade "pip==25.3" \
    && pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim-bookworm
RUN useradd --create-home --uid 10001 cvmjob
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER 10001
WORKDIR /work
ENV CVMJOB_HOME=/home/cvmjob/.cvmjob
ENTRYPOINT ["cvmjob"]
CMD ["--help"]

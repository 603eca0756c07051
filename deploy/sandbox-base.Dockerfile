# The sandbox base image (CALCGRAPH_SANDBOX_BASE_IMAGE, default calcgraph/python-base): what
# function images are built FROM and what the docker sandbox runs. It needs python3 (3.11 or
# later) and runs functions as uid 65534 (nobody), which python:3.11-slim already has.
FROM python:3.11-slim

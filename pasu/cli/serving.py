"""`pasu serve`: the cloud HTTP service."""

import argparse

from pasu.cli.common import Commands, positive_int


def cmd_serve(args: argparse.Namespace) -> int:
    import os

    import uvicorn

    from pasu.cloud.settings import SETTINGS_ENV, ServiceSettings, check_no_auth_host, read_api_keys

    if args.no_auth:
        check_no_auth_host(args.host)
    settings = ServiceSettings(
        api_keys=() if args.no_auth else read_api_keys(args.api_keys_file),
        require_auth=not args.no_auth,
        max_body_bytes=int(args.max_body_mb * 1024 * 1024),
        max_audio_seconds=args.max_audio_seconds,
        model_workers=args.model_workers,
        max_queue=args.max_queue,
        request_timeout_s=args.timeout,
        model=args.model,
        intent=args.intent,
        intent_path=args.intent_path,
        short_window=args.short_window,
        cpu_threads=args.cpu_threads,
        debug_audio_dir=args.debug_audio_dir,
    )
    os.environ[SETTINGS_ENV] = settings.to_env()
    if args.workers == 1:  # load the model before listening, so start-up errors show here
        from pasu.cloud.app import create_app_from_env

        app = create_app_from_env()
        uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    else:
        uvicorn.run(
            "pasu.cloud.app:create_app_from_env",
            factory=True,
            host=args.host,
            port=args.port,
            workers=args.workers,
            log_level=args.log_level,
        )
    return 0


def add_commands(commands: Commands) -> None:
    serve = commands.add_parser("serve", help="run the cloud HTTP service")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080)
    serve.add_argument(
        "--workers",
        type=positive_int,
        default=1,
        help="uvicorn worker processes, each with its own model",
    )
    serve.add_argument(
        "--model-workers",
        type=positive_int,
        default=1,
        help="utterances each process decodes at once",
    )
    serve.add_argument(
        "--max-queue", type=int, default=8, help="waiting requests per process before answering 503"
    )
    serve.add_argument("--timeout", type=float, default=30.0, help="per-request seconds")
    serve.add_argument("--max-body-mb", type=float, default=10.0)
    serve.add_argument("--max-audio-seconds", type=float, default=30.0)
    serve.add_argument(
        "--model",
        default="whisper-base",
        help="whisper-base, whisper-tiny.en or a CTranslate2 model directory",
    )
    serve.add_argument("--intent", default="minilm", choices=("minilm", "text"))
    serve.add_argument("--intent-path", help="intent classifier file (default: the shipped one)")
    serve.add_argument(
        "--short-window",
        action="store_true",
        help="run Whisper on a 10 s window with guards (faster, +1 WER point measured)",
    )
    serve.add_argument("--cpu-threads", type=positive_int, default=2)
    serve.add_argument("--api-keys-file", help="one key per line; also read from $PASU_API_KEYS")
    serve.add_argument(
        "--no-auth", action="store_true", help="no API keys (development on a loopback host only)"
    )
    serve.add_argument("--debug-audio-dir", help="keep every received clip here (off by default)")
    serve.add_argument("--log-level", default="info")
    serve.set_defaults(handler=cmd_serve)

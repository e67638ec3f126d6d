// quarkctl: the command-line client of quarkd's QuantizationService.
//   quarkctl [--server HOST:PORT] [--token T] [--tls-ca CA.pem [--tls-cert C.pem --tls-key K.pem]]
//            [-o table|json] [--timeout SECONDS] COMMAND ...
//   submit (-f JOB_FILE | --model URI (--scheme NAME | --config FILE) --output URI) [--kv-cache-dtype fp8]
//          [--calib URI] [--num-calib-samples N] [--seq-len L] [--seed S] [--eval URI] [--exclude NAME]...
//          [--label K=V]... [--export hf_quark|gguf|onnx|compressed_tensors]... [--priority P] [--max-attempts N]
//          [--deadline S] [--force]
//          [--request-id ID] [--wait]
//   get ID | list [--state S]... [--label K=V]... [--page-size N] [--all] | watch ID [--after SEQ]
//   cancel ID | presets | validate [--model URI] (--scheme NAME | --config FILE) [--kv-cache-dtype D] [--exclude N]...
//   audit [--after SEQ] [--tenant T] | drain WORKER | resume WORKER      (admin role)
// --token defaults to $QUARK_TOKEN, --tls-* to $QUARK_TLS_CA / $QUARK_TLS_CERT / $QUARK_TLS_KEY.
// --server defaults to $QUARK_SERVER, then localhost:50051. With -o json every result is protobuf's JSON on one
// line; `submit --wait -o json` and `watch -o json` end with the final Job as the last line. Exit codes: see
// client/output.h (0 succeeded, 1 failed, 2 usage, 3 cancelled, 4 RPC error, 5 invalid config).
#pragma once

#include <ostream>

namespace quark::client {

/// Runs quarkctl with `argv`; results go to `out`, progress bars and errors to `err`. Returns the exit code.
/// `err_is_tty` selects the live (carriage-return) progress bar over one line per phase / 10%.
int RunQuarkctl(int argc, const char* const* argv, std::ostream& out, std::ostream& err, bool err_is_tty);

}  // namespace quark::client

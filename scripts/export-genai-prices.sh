#!/usr/bin/env bash
# Exports the LLM price data bundled in the npm package @pydantic/genai-prices
# (MIT, https://github.com/pydantic/genai-prices) to the file tracelake
# embeds: internal/prices/genai-prices.json. Run it to take a newer release,
# then `go test ./internal/prices/` and commit; or hand the output file to
# `tracelake prices update --file F` to use it without a rebuild.
#
#   scripts/export-genai-prices.sh [VERSION] [OUT]
#
# Needs node and npm (the package is fetched from the npm registry).
set -euo pipefail
version=${1:-latest}
out=${2:-$(cd "$(dirname "$0")/.." && pwd)/internal/prices/genai-prices.json}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
npm pack --silent "@pydantic/genai-prices@$version" >/dev/null
tar xzf pydantic-genai-prices-*.tgz
resolved=$(node -p 'require("./package/package.json").version')
cat > export.mjs <<'JS'
// waitForUpdate() resolves to the provider data the package bundles when no
// remote update was asked for.
import { waitForUpdate } from './package/dist/index.js'
const providers = await waitForUpdate()
// Only what price matching needs: the package also carries descriptions and
// response-parsing rules tracelake does not use.
const keepProvider = ['id', 'name', 'api_pattern', 'provider_match', 'model_match', 'fallback_model_providers', 'pricing_urls', 'models']
const keepModel = ['id', 'name', 'match', 'prices', 'deprecated']
const pick = (o, keys) => Object.fromEntries(keys.filter((k) => o[k] !== undefined).map((k) => [k, o[k]]))
const out = {
  source: 'npm @pydantic/genai-prices@' + process.argv[2],
  license: 'MIT, Copyright (c) Pydantic Services Inc. 2025 to present (https://github.com/pydantic/genai-prices)',
  exported: new Date().toISOString().slice(0, 10),
  providers: providers.map((p) => ({ ...pick(p, keepProvider), models: p.models.map((m) => pick(m, keepModel)) })),
}
process.stdout.write(JSON.stringify(out, null, 1) + '\n')
JS
node export.mjs "$resolved" > "$out.tmp"
mv "$out.tmp" "$out"
echo "exported @pydantic/genai-prices@$resolved to $out" >&2

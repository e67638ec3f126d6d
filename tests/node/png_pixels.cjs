// Decodes a PNG with sharp (libvips; npm sharp, which @huggingface/transformers brings into tests/peers) and prints
// its header and the colour of the pixels asked for, for tests/client/report_png_test.cc:
//   node png_pixels.cjs FILE X,Y [X,Y ...]  ->  {"width", "height", "channels", "format", "pixels": ["#rrggbb", ...]}
// Exits 77 when sharp is missing (tests/node/peer_missing.cjs), 1 when the file does not decode.
'use strict';
const path = require('path');
const { peerMissing } = require('./peer_missing.cjs');

async function main() {
  const [file, ...points] = process.argv.slice(2);
  let sharp;
  try {
    sharp = require(path.join(__dirname, '..', 'peers', 'node_modules', 'sharp'));
  } catch (error) {
    peerMissing(`npm sharp is not installed under tests/peers (scripts/install-test-peers.sh): ${error.message}`);
  }
  const meta = await sharp(file).metadata();
  const { data, info } = await sharp(file).raw().toBuffer({ resolveWithObject: true });
  const hex = (v) => v.toString(16).padStart(2, '0');
  const pixels = points.map((p) => {
    const [x, y] = p.split(',').map(Number);
    const i = (y * info.width + x) * info.channels;
    return `#${hex(data[i])}${hex(data[i + 1])}${hex(data[i + 2])}`;
  });
  console.log(JSON.stringify({ width: info.width, height: info.height, channels: info.channels, format: meta.format,
                               pixels }));
}

main().catch((error) => {
  console.error(`png_pixels: ${error.message}`);
  process.exit(1);
});

// Stands in for agentchat's `dist/lib/server.js` when agentchat's own test files run against
// hubbub (run.sh): `new AgentChatServer({port, ...}).start()` starts `hubbub serve` on that
// port, `stop()` stops it. agentchat-compatible defaults: open mode, agentchat's channel set,
// a fresh memory store per server. Options hubbub has an equivalent for are mapped:
// allowlistEnabled + allowlistStrict → agentchat_keys.allowlist: strict; allowlistAdminKey →
// the token of an admin participant (so ADMIN_KICK/BAN's admin_key works). Not for CI.
import { spawn, execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const HUBBUB = process.env.HUBBUB || 'hubbub';
const running = new Set();
process.on('exit', () => { for (const p of running) p.kill('SIGKILL'); });

function spaceYaml(options) {
  const lines = ['space: default', 'open: true', 'agentchat_channels: true'];
  if (options.allowlistEnabled && options.allowlistStrict) {
    lines.push('agentchat_keys:', '  allowlist: strict');
  }
  if (options.allowlistAdminKey) {
    const hash = crypto.createHash('sha256').update(options.allowlistAdminKey).digest('hex');
    lines.push('participants:', '  admin:', '    role: admin', `    token_hash: "sha256:${hash}"`);
  }
  return lines.join('\n') + '\n';
}

function waitListening(port) {
  // synchronous, as agentchat's server.start() is: the test connects right after it
  const probe = `
    const net = require('node:net'); const end = Date.now() + 20000;
    (function tryOnce() {
      const s = net.connect(${port}, '127.0.0.1');
      s.on('connect', () => { s.end(); process.exit(0); });
      s.on('error', () => { if (Date.now() > end) process.exit(1); setTimeout(tryOnce, 50); });
    })();`;
  execFileSync(process.execPath, ['-e', probe], { stdio: 'inherit' });
}

export class AgentChatServer {
  constructor(options = {}) {
    this.options = options;
    this.port = options.port ?? 6667;
    this.proc = null;
    // agentchat's per-address reconnect backoff, which its tests clear between cases:
    // hubbub has none, so there is nothing to clear
    this.reconnectBackoff = new Map();
  }

  start() {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hubbub-agentchat-'));
    const cfg = path.join(dir, 'space.yaml');
    fs.writeFileSync(cfg, spaceYaml(this.options));
    const args = ['serve', '--port', String(this.port), '--space-config', cfg,
      '--data-dir', dir, '--store', 'memory', '--log-level', 'warning'];
    this.proc = spawn(HUBBUB, args, { stdio: ['ignore', 'ignore', 'inherit'] });
    running.add(this.proc);
    waitListening(this.port);
    this.startedAt = Date.now();
  }

  stop() {
    if (!this.proc) return;
    this.proc.kill('SIGTERM');
    running.delete(this.proc);
    this.proc = null;
  }
}

// A minimal event emitter: `on(name, fn)` returns a function that removes `fn`.

export class Emitter {
  constructor() {
    this._handlers = new Map();
  }

  on(name, fn) {
    let list = this._handlers.get(name);
    if (!list) {
      list = [];
      this._handlers.set(name, list);
    }
    list.push(fn);
    return () => {
      const at = list.indexOf(fn);
      if (at >= 0) list.splice(at, 1);
    };
  }

  emit(name, ...args) {
    for (const fn of [...(this._handlers.get(name) || [])]) fn(...args);
  }
}

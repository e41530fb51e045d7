// gpupack serve: sorting and filtering of the dashboard's tables. It reads
// the page's text and data-v attributes only and writes no markup: every
// value was escaped by the server, and stays text here.
'use strict';

// sortKey is a cell's value for sorting: data-v when given (numbers; empty
// is unknown), else its text.
function sortKey(cell, numeric) {
  const v = cell.dataset.v !== undefined ? cell.dataset.v : cell.textContent.trim();
  if (numeric) {
    return v === '' ? NaN : Number(v);
  }
  return v.toLowerCase();
}

function sortTable(table, col, th) {
  const numeric = th.dataset.type === 'num';
  const ascending = th.getAttribute('aria-sort') !== 'ascending';
  for (const h of table.tHead.rows[0].cells) {
    h.removeAttribute('aria-sort');
  }
  th.setAttribute('aria-sort', ascending ? 'ascending' : 'descending');
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  const dir = ascending ? 1 : -1;
  rows.sort((a, b) => {
    const x = sortKey(a.cells[col], numeric);
    const y = sortKey(b.cells[col], numeric);
    if (numeric) {
      // Unknown values go last in either direction.
      if (Number.isNaN(x) || Number.isNaN(y)) {
        return Number.isNaN(x) - Number.isNaN(y);
      }
      return dir * (x - y);
    }
    return dir * x.localeCompare(y);
  });
  for (const r of rows) {
    body.appendChild(r);
  }
}

function filterTable(input) {
  const table = document.getElementById(input.dataset.table);
  const count = document.getElementById(input.dataset.count);
  const want = input.value.trim().toLowerCase();
  let shown = 0;
  const rows = table.tBodies[0].rows;
  for (const r of rows) {
    const text = Array.from(r.querySelectorAll('td.f'), c => c.textContent.toLowerCase()).join(' ');
    r.hidden = want !== '' && !text.includes(want);
    if (!r.hidden) {
      shown++;
    }
  }
  if (count) {
    count.textContent = shown + ' of ' + rows.length;
  }
}

document.addEventListener('DOMContentLoaded', () => {
  for (const table of document.querySelectorAll('table.sortable')) {
    Array.from(table.tHead.rows[0].cells).forEach((th, col) => {
      th.tabIndex = 0;
      th.addEventListener('click', () => sortTable(table, col, th));
      th.addEventListener('keydown', e => {
        if (e.key === 'Enter' || e.key === ' ') {
          e.preventDefault();
          sortTable(table, col, th);
        }
      });
    });
  }
  for (const input of document.querySelectorAll('input.filter')) {
    input.addEventListener('input', () => filterTable(input));
  }
});

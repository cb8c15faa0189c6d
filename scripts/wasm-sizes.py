#!/usr/bin/env python3
"""Code bytes per Rust module path in a wasm binary with a name section (a pre-wasm-opt cargo
build, e.g. target/wasm32-unknown-unknown/wasm-page/app.wasm): where the page's size goes.
Usage: scripts/wasm-sizes.py FILE.wasm [PATH_DEPTH=2] [TOP=50]"""
import sys, struct, re, collections
def leb(b,i):
    r=s=0
    while True:
        x=b[i]; i+=1; r|=(x&0x7f)<<s; s+=7
        if x<0x80: return r,i
data=open(sys.argv[1],'rb').read()
i=8; secs=[]
while i<len(data):
    sid=data[i]; i+=1; n,i=leb(data,i); secs.append((sid,i,n)); i+=n
nimports=0; sizes=[]; names={}
for sid,off,n in secs:
    if sid==2:
        j=off; cnt,j=leb(data,j)
        for _ in range(cnt):
            l,j=leb(data,j); j+=l; l,j=leb(data,j); j+=l; kind=data[j]; j+=1
            if kind==0: _,j=leb(data,j); nimports+=1
            elif kind==1: j+=1; fl=data[j]; j+=1; _,j=leb(data,j); 
            elif kind==2:
                fl=data[j]; j+=1; _,j=leb(data,j)
                if fl&1: _,j=leb(data,j)
            elif kind==3: j+=2
    if sid==10:
        j=off; cnt,j=leb(data,j)
        for _ in range(cnt):
            l,j2=leb(data,j); sizes.append(l+(j2-j)); j=j2+l
    if sid==0:
        j=off; l,j=leb(data,j); nm=data[j:j+l].decode(); j+=l
        if nm=='name':
            end=off+n
            while j<end:
                t=data[j]; j+=1; sl,j=leb(data,j); e=j+sl
                if t==1:
                    cnt,j=leb(data,j)
                    for _ in range(cnt):
                        idx,j=leb(data,j); l,j=leb(data,j); names[idx]=data[j:j+l].decode('utf8','replace'); j+=l
                j=e
    if sid==11: print('data section', n)
print('imports',nimports,'funcs',len(sizes),'code total',sum(sizes))
agg=collections.Counter()
allf=[]
for k,s in enumerate(sizes):
    nm=names.get(k+nimports,'?')
    allf.append((s,nm))
# crude demangle-free grouping by crate::module from legacy mangling _ZN...
def path(nm):
    m=re.findall(r'(\d+)([A-Za-z_][A-Za-z0-9_$.]*)', nm[3:] if nm.startswith('_ZN') else '')
    parts=[]; 
    # parse legacy: sequence of <len><ident>
    s=nm[3:]; p=0; out=[]
    while p<len(s) and s[p].isdigit():
        q=p
        while s[q].isdigit(): q+=1
        L=int(s[p:q]); out.append(s[q:q+L]); p=q+L
    return out
for s,nm in allf:
    pp=path(nm)
    key='::'.join(pp[:int(sys.argv[2]) if len(sys.argv)>2 else 2]) if pp else nm[:40]
    agg[key]+=s
for k,v in agg.most_common(int(sys.argv[3]) if len(sys.argv)>3 else 50): print(v,k)
